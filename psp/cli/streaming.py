"""What ``psp embed`` and ``psp score`` share: input lines in batches, and two overlapping stages.

Both commands read and tokenise in the main thread while a second thread pools the previous
batch and writes it out. SentencePiece's batch encode, torch's pooling and file writes all
release the GIL, so with a free core the stages overlap and the slowest sets the pace instead of
the sum of all of them. A bounded queue between the two keeps memory at a few batches whatever
the input size.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from psp.io import InputError, iter_lines

STDIN = "-"
T = TypeVar("T")
_END = object()


def iter_input_lines(spec: str) -> Iterator[tuple[int, str]]:
    """``(line_number, text)`` of a UTF-8 file (plain or ``.gz``), or of stdin when ``spec`` is ``-``.

    Invalid UTF-8 is an :class:`InputError` naming the file (``<stdin>``) and the line.
    """
    if spec != STDIN:
        yield from iter_lines(spec)
        return
    for lineno, raw in enumerate(sys.stdin.buffer, start=1):
        try:
            yield lineno, raw.rstrip(b"\r\n").decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"<stdin>:{lineno}: invalid UTF-8 ({err.reason})") from err


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
