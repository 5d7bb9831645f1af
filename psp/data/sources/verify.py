"""What makes a downloaded file trustworthy when the registry cannot pin its checksum.

Two checks, for the files nobody has hashed yet (see :mod:`psp.data.sources.registry`):

- :func:`check_content`: before a download is renamed into place, it must be whole for its kind
  (a zip whose every member passes its CRC, a gzip stream up to its trailer, a tar that lists to
  its end) and never an HTML page, which is what a server sends for an error or a login wall
  with status 200. A body cut short by a server that sent no ``Content-Length`` fails here.
- :class:`DownloadLock`: the size and sha256 of each file the first time it was downloaded, in
  ``downloads.lock.json`` next to the downloads (as pip's hash-checking mode and conda lock files
  do). Every later use of the file, and every later download of the same URL, must match it.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from psp.io import atomic_open

LOCK_NAME = "downloads.lock.json"
_HTML_STARTS = (b"<!doctype html", b"<html", b"<?xml", b"<head", b"<body")


class ContentError(ValueError):
    """A downloaded file is not the one expected (wrong checksum, an HTML page, corrupt)."""


class IncompleteContent(ContentError):
    """An archive or gzip stream that ends early: a download cut short, worth restarting."""


def check_content(path: str | os.PathLike, name: str) -> None:
    """Raise :class:`ContentError` unless ``path`` is a complete file of the kind ``name`` says.

    ``name`` is the file's final name (``path`` is usually its ``.part``): ``.zip``, ``.tar.gz``
    / ``.tgz``, ``.tar.bz2``, ``.gz`` are read to their end; anything else only has to not be an HTML page.
    """
    path = Path(path)
    with open(path, "rb") as handle:
        head = handle.read(512).lstrip().lower()
    if head.startswith(_HTML_STARTS):
        raise ContentError(f"{name}: the server sent an HTML page, not the file")
    try:
        if name.endswith(".zip"):
            _check_zip(path)
        elif name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(path, "r:gz") as tar:
                for _ in tar:
                    pass
            _check_gzip(path)
        elif name.endswith(".tar.bz2"):
            with tarfile.open(path, "r:bz2") as tar:
                for _ in tar:
                    pass
        elif name.endswith(".gz"):
            _check_gzip(path)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, OSError) as err:
        raise IncompleteContent(f"{name}: incomplete or corrupt ({err})") from err


def _check_zip(path: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        bad = archive.testzip()
    if bad is not None:
        raise ContentError(f"{path.name}: member {bad} fails its CRC check")


def _check_gzip(path: Path) -> None:
    """Decompress to the end: only the trailer's CRC and length prove the stream is whole."""
    with gzip.open(path, "rb") as stream:
        while stream.read(1 << 20):
            pass


class DownloadLock:
    """``downloads.lock.json``: URL → ``{"file", "size", "sha256"}`` of its first download.

    Read-modify-write happens under an exclusive ``flock`` on the download folder itself, so
    parallel fetch jobs sharing it do not drop each other's entries.
    """

    def __init__(self, folder: str | os.PathLike) -> None:
        self.path = Path(folder) / LOCK_NAME

    def get(self, url: str) -> dict | None:
        return self._read().get(url)

    def record(self, url: str, file: Path, size: int, sha256: str) -> None:
        with self._exclusive():
            entries = self._read()
            entries[url] = {"file": file.name, "size": size, "sha256": sha256}
            self._write(entries)

    def forget(self, url: str) -> None:
        with self._exclusive():
            entries = self._read()
            if entries.pop(url, None) is not None:
                self._write(entries)

    def _read(self) -> dict:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}

    def _write(self, entries: dict) -> None:
        with atomic_open(self.path, "wt") as out:
            json.dump(dict(sorted(entries.items())), out, indent=1)
            out.write("\n")

    def _exclusive(self) -> contextlib.AbstractContextManager[None]:
        return holding(self.path.parent)


@contextlib.contextmanager
def holding(folder: str | os.PathLike) -> Iterator[None]:
    """An exclusive ``flock`` on ``folder`` itself (created if missing), held for the block:
    processes that share the folder take turns."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
