"""Small I/O primitives shared by every stage: atomic writes and line readers with good errors.

Every output of the pipeline goes through :func:`atomic_path` or :func:`atomic_open`, so a crash
never leaves a half-written file where a later rule (or a rerun) would take it for done.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path


class InputError(ValueError):
    """Bad input data; the message names the file (and the line where there is one)."""


def _tmp_name(path: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    # mkstemp creates 0600; outputs should get the usual permissions under the process umask.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(name, 0o666 & ~umask)
    return Path(name)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds.

    Use it for writers that want a file name (h5py, numpy, safetensors, matplotlib).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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


def read_lines(path: str | os.PathLike) -> list[str]:
    """All lines of a UTF-8 text file (plain or ``.gz``), newlines stripped."""
    return [text for _, text in iter_lines(path)]
