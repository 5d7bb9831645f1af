"""What ``psp embed`` and ``psp score`` share: input lines in batches, and two overlapping stages.

Both commands read and tokenise in the main thread while a second thread pools the previous
batch and writes it out. The word cache's lookups, the compiled pooling (see
:mod:`psp.model.pooling`) and file writes all release the GIL, so with a free core the stages
overlap and the slowest sets the pace instead of the sum of all of them. A bounded queue between
the two keeps memory at a few batches whatever the input size.

Input is read in blocks of at most :data:`READ_BYTES`, each decoded and split in one call: a line
at a time, the Python generators cost about as much CPU as pooling the line. A block is what one
read returns: a pipe gives what it holds, so lines are processed as they arrive, and a pipe on
standard input is waited on with ``select`` in short steps, so that a SIGTERM is handled within
:data:`SIGNAL_POLL_S` even while the pipe stays open and idle (see :func:`_read_blocks`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from psp.io import InputError, compression_errors, open_binary

STDIN = "-"
READ_BYTES = 1 << 20
SIGNAL_POLL_S = 0.2
T = TypeVar("T")
_END = object()


def iter_input_batches(path: str, size: int) -> Iterator[tuple[int, list[str]]]:
    """``(first_line_number, lines)``: the lines of a UTF-8 file (plain, ``.gz`` or ``.zst``), or of stdin
    when ``path`` is ``-``, ``size`` at a time (the last batch may be shorter).

    Lines are split at ``\n`` only, and lose trailing ``\r``; a last line without a newline
    counts. Invalid UTF-8 is an :class:`InputError` naming the file (``<stdin>``) and the line,
    and so is a corrupt or truncated compressed file.
    """
    pending: list[str] = []
    first = 1
    for lines in _iter_line_blocks(path):
        pending.extend(lines)
        if len(pending) >= size:
            whole = len(pending) - len(pending) % size
            for start in range(0, whole, size):
                yield first + start, pending[start : start + size]
            first += whole
            del pending[:whole]
    if pending:
        yield first, pending


def _iter_line_blocks(path: str) -> Iterator[list[str]]:
    """The decoded lines of each block read (cut after its last newline)."""
    name = "<stdin>" if path == STDIN else path
    lineno = 0  # lines yielded so far
    try:
        source = contextlib.nullcontext(sys.stdin.buffer) if path == STDIN else open_binary(path)
        with source as handle:
            tail = b""
            for chunk in _read_blocks(handle, stdin=path == STDIN):
                data = tail + chunk
                cut = data.rfind(b"\n") + 1
                tail = data[cut:]
                if cut:
                    lines = _decode_lines(data[: cut - 1], name, lineno)
                    lineno += len(lines)
                    yield lines
            if tail:
                yield _decode_lines(tail, name, lineno)
    except compression_errors() as err:
        raise InputError(
            f"{name}: corrupt or truncated compressed file after line {lineno}: {err}"
        ) from err


def _read_blocks(handle, *, stdin: bool) -> Iterator[bytes]:
    """What each read of ``handle`` returns, until end of file.

    Standard input may be a pipe that stays open and idle. Python runs a signal's handler in the
    main thread, but the kernel may deliver the signal to any thread: delivered to a worker, it
    does not interrupt the main thread's ``read``, which then waits for input that never comes
    while the SIGTERM that should end the process stays pending. So a pipe or terminal is read
    only once ``select`` says it holds data, waiting at most :data:`SIGNAL_POLL_S` at a time,
    and a pending handler runs within that.
    """
    fd = _waitable_fd(handle) if stdin else None
    if fd is None:
        while chunk := handle.read1(READ_BYTES):
            yield chunk
        return
    while True:
        while not select.select([fd], [], [], SIGNAL_POLL_S)[0]:
            pass
        chunk = os.read(fd, READ_BYTES)  # the fd itself: nothing of it is buffered above it
        if not chunk:
            return
        yield chunk


def _waitable_fd(handle) -> int | None:
    """The file descriptor of a pipe, socket or terminal behind ``handle``, else None."""
    try:
        fd = handle.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    return fd if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode) else None


def _decode_lines(raw: bytes, name: str, before: int) -> list[str]:
    """``raw`` (lines joined by ``\n``, the first one being line ``before + 1``) split into
    lines without trailing ``\r``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = before + raw.count(b"\n", 0, err.start) + 1
        raise InputError(f"{name}:{bad}: invalid UTF-8 ({err.reason})") from err
    lines = text.split("\n")
    if "\r" in text:
        lines = [line.rstrip("\r") for line in lines]
    return lines


def overlapped(items: Iterable[T], consume: Callable[[T], None], depth: int = 4) -> None:
    """Call ``consume`` on every item, in order, in a second thread, while this thread produces
    the next items (at most ``depth`` wait in between).

    An exception on either side stops both and is raised here: the producer's as soon as it
    happens (queued items are dropped), the consumer's at the producer's next item.
    """
    waiting: queue.Queue = queue.Queue(maxsize=depth)
    failed: list[BaseException] = []
    stop = threading.Event()

    def worker() -> None:
        while (item := waiting.get()) is not _END:
            if stop.is_set():
                continue  # keep draining, so the producer never blocks on a full queue
            try:
                consume(item)
            except BaseException as err:
                failed.append(err)
                stop.set()

    thread = threading.Thread(target=worker, name="psp-consumer", daemon=True)
    thread.start()
    try:
        for item in items:
            if stop.is_set():
                break
            waiting.put(item)
    except BaseException:
        stop.set()
        raise
    finally:
        waiting.put(_END)
        thread.join()
    if failed:
        raise failed[0]
