"""Small I/O primitives shared by every stage: atomic writes and line readers with good errors.

Every output of the pipeline goes through :func:`atomic_path` or :func:`atomic_open`, so a crash
never leaves a half-written file where a later rule (or a rerun) would take it for done.

Temporaries live next to their output and carry the host and process id in their name
(``.{name}.{host}-{pid}.{random}``). They are removed when the writer raises, and on SIGTERM
once :func:`exit_on_sigterm` is installed; a process killed outright (SIGKILL, out of memory)
cannot clean up, so the next write of the same output removes the temporaries of dead processes
of this host first (:func:`sweep_stale`).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import io
import os
import re
import shutil
import signal
import socket
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class InputError(ValueError):
    """Bad input data; the message names the file (and the line where there is one)."""


# ``.{name}.{host}-{pid}.{random}[.tmp]``: tempfile's random part is 8 of [a-z0-9_].
_TEMPORARY = re.compile(r"\..+\.(?P<host>[^/]+)-(?P<pid>\d+)\.[a-z0-9_]{8}(\.tmp)?")


def _owner_prefix(path: Path) -> str:
    return f".{path.name}.{socket.gethostname()}-{os.getpid()}."


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def sweep_stale(path: str | os.PathLike) -> list[Path]:
    """Remove the temporaries next to ``path`` (files or folders, of any output in its folder)
    that dead processes of this host left; returns what was removed.

    Temporaries of live processes, and of other hosts sharing the file system, are left alone.
    The whole folder is swept, not only ``path``'s own, because some outputs are never written
    again under the same name (a training checkpoint is named by its step).
    """
    host, removed = socket.gethostname(), []
    with contextlib.suppress(FileNotFoundError):
        for entry in Path(path).parent.iterdir():
            match = _TEMPORARY.fullmatch(entry.name)
            if not match or match["host"] != host or _pid_alive(int(match["pid"])):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def output_mode() -> int:
    """The mode a new file gets under this process's umask (0644 under the usual 022)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            umask = next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration):
        # os.umask can only be read by setting it; a thread creating a file meanwhile would get
        # the wrong mode, so this is the fallback where /proc does not say.
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def scratch_dir(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary folder next to ``path`` for a writer's intermediate files, removed afterwards
    (stale ones of dead processes are swept first, as for :func:`atomic_path`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(path)
    with tempfile.TemporaryDirectory(prefix=_owner_prefix(path), dir=path.parent) as tmp:
        yield Path(tmp)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds.

    Use it for writers that want a file name (h5py, numpy, safetensors, matplotlib). The output
    gets the mode the umask gives a new file, whatever the writer created (mkstemp and
    safetensors create 0600, which would keep other users of a shared file system out).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(path)
    fd, name = tempfile.mkstemp(prefix=_owner_prefix(path), suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, output_mode())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def exit_on_sigterm() -> None:
    """Make SIGTERM raise :class:`SystemExit` in the main thread, as SIGINT raises
    :class:`KeyboardInterrupt`, so ``finally`` blocks and :func:`atomic_path` remove temporaries
    when a scheduler or a user terminates the process. Call it from the main thread.

    Processes forked afterwards get the default action back at once: a multiprocessing pool
    stops its workers with SIGTERM, and a worker blocked in C code (a lock a thread of the
    parent held at the fork) never returns to Python to run a handler, so only the default
    action ends it.
    """

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    _reset_sigterm_in_children()


@functools.cache
def _reset_sigterm_in_children() -> None:
    """Register, once per process, the fork hook that restores SIGTERM's default action."""
    os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wt", encoding: str = "utf-8"):
    """Open ``path`` for writing through a temporary file; ``.gz`` paths are gzip-compressed.

    The file appears under its final name only once the ``with`` block exits without error.
    """
    path = Path(path)
    binary = "b" in mode
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        raw = handle
        if path.suffix == ".gz":
            # No file name or time in the gzip header: the same content gives the same bytes.
            raw = gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=handle, mtime=0)
        with raw:
            if binary:
                yield raw
            else:
                with io.TextIOWrapper(raw, encoding=encoding, newline="\n") as text:
                    yield text


def sha256_file(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def open_binary(path: str | os.PathLike):
    """Open a plain or gzipped file for binary reading (by suffix)."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def iter_raw_lines(path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_bytes_without_newline)``, 1-based.

    A truncated or corrupt gzip stream raises :class:`InputError` naming the file and the last
    good line, instead of gzip's bare ``EOFError``.
    """
    lineno = 0
    try:
        with open_binary(path) as handle:
            for lineno, raw in enumerate(handle, start=1):
                yield lineno, raw.rstrip(b"\r\n")
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise InputError(
            f"{path}: corrupt or truncated compressed file after line {lineno}: {err}"
        ) from err


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` of a UTF-8 file; invalid UTF-8 is an error naming file and line."""
    for lineno, raw in iter_raw_lines(path):
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{path}:{lineno}: invalid UTF-8 ({err.reason})") from err


def iter_batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of ``size`` consecutive items (the last may be shorter)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def read_lines(path: str | os.PathLike) -> list[str]:
    """All lines of a UTF-8 text file (plain or ``.gz``), newlines stripped."""
    return [text for _, text in iter_lines(path)]
