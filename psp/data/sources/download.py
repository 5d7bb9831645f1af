"""Streaming HTTP download that resumes a ``.part`` file with ``Range``, retries transient
failures, verifies the file (a pinned sha256, else the lock file and a content check) and renames
atomically."""

from __future__ import annotations

import http.client
import logging
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from tqdm import tqdm

from psp.data.sources.registry import Source, SourceError
from psp.data.sources.verify import (
    ContentError,
    DownloadLock,
    IncompleteContent,
    check_content,
    holding,
)
from psp.io import sha256_file, write_error

log = logging.getLogger(__name__)


class DownloadError(RuntimeError):
    """A download failed for good: the message names the URL and the reason."""


# --------------------------------------------------------------------------------------------
# Download

_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class _Transient(Exception):
    """A failure worth retrying (connection dropped, timeout, 5xx)."""


def download(
    url: str,
    dest: str | os.PathLike,
    *,
    sha256: str | None = None,
    retries: int = 3,
    timeout: float = 60,
    chunk_size: int = 1 << 20,
    progress: bool = True,
    backoff: float = 2.0,
    lock: DownloadLock | None = None,
    origin: str | None = None,
) -> Path:
    """Fetch ``url`` to ``dest``; resumable, retried, verified, atomic.

    Bytes go to ``dest.part`` first. A ``.part`` left by an earlier attempt (or an earlier run)
    is continued with ``Range: bytes=N-``; a server that answers 200 instead of 206 sends the
    whole file, so the part is restarted. Connection errors, truncated bodies and 5xx answers
    are retried ``retries`` times with exponential backoff, keeping the ``.part``.

    Before the rename the part is verified: against ``sha256`` when the registry pins one, else
    against ``lock``'s record of the first download of ``url``, else by :func:`check_content`
    (and then recorded in ``lock``). A part that is incomplete for its kind (a body cut short
    without ``Content-Length``) is restarted like a dropped connection; a checksum mismatch, an
    HTML page or a client error (404...) removes the ``.part`` and raises :class:`DownloadError`.
    Nothing is left behind, and ``dest`` only ever appears complete and verified.

    Returns ``dest``. An existing ``dest`` is verified the same way and kept if it passes; if it
    fails, it is moved aside (``.rejected``) and downloaded again. ``origin`` is the upstream
    URL ``lock`` files the entry under when ``url`` is a mirror's copy of it.
    """
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    key = origin or url
    expected = {"sha256": sha256} if sha256 is not None else (lock and lock.get(key))
    if dest.exists():
        try:
            _verify(dest, dest.name, expected, lock)
            _remember(key, dest, expected, lock)
            return dest
        except ContentError as err:
            log.warning("%s: %s; moved to %s, downloading again", dest, err, set_aside(dest))
    dest.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(retries + 1):
        try:
            _fetch_to_part(url, part, timeout=timeout, chunk_size=chunk_size, progress=progress)
            _check_part(url, part, name=dest.name, expected=expected, lock=lock)
            break
        except _Transient as err:
            if attempt == retries:
                raise DownloadError(
                    f"{url}: giving up after {retries + 1} attempts: {err}"
                ) from err
            wait = backoff * 2**attempt
            log.warning("%s: %s; retrying in %.1f s", url, err, wait)
            time.sleep(wait)
    os.replace(part, dest)
    _remember(key, dest, expected, lock)
    return dest


def _verify(path: Path, name: str, expected: dict | None, lock: DownloadLock | None) -> None:
    """Raise :class:`ContentError` unless ``path`` can be trusted as ``name``; ``expected`` is the
    registry's pin or ``lock``'s entry, and without either the content is checked."""
    if expected is None:
        check_content(path, name)
        return
    actual = sha256_file(path)
    if actual == expected["sha256"]:
        return
    if "size" not in expected:
        raise ContentError(f"sha256 mismatch: expected {expected['sha256']}, got {actual}")
    raise ContentError(
        f"size {path.stat().st_size} and sha256 {actual} differ from the {expected['size']} bytes "
        f"and {expected['sha256']} that {lock.path} recorded on its first download; if upstream "
        "really changed the file, delete its entry there"
    )


def _check_part(
    url: str, part: Path, *, name: str, expected: dict | None, lock: DownloadLock | None
) -> None:
    """Verify a finished ``.part``: incomplete content is retried from scratch, anything else
    (a checksum mismatch, an HTML page) is final. A failing part is removed either way."""
    try:
        _verify(part, name, expected, lock)
    except IncompleteContent as err:
        part.unlink()
        raise _Transient(f"{err}; restarting") from err
    except ContentError as err:
        part.unlink()
        raise DownloadError(f"{url}: {err}") from err


def _remember(url: str, path: Path, expected: dict | None, lock: DownloadLock | None) -> None:
    """Record a file that passed without a pin or entry, so later runs hold it to these bytes."""
    if lock is not None and expected is None:
        lock.record(url, path, path.stat().st_size, sha256_file(path))


def set_aside(path: Path, url: str | None = None, lock: DownloadLock | None = None) -> Path:
    """Move a download that cannot be used to ``<name>.rejected`` (kept for inspection, out of
    the way of the next download) and drop its lock entry, which described those bytes."""
    aside = path.with_name(path.name + ".rejected")
    os.replace(path, aside)
    if lock is not None and url is not None:
        lock.forget(url)
    return aside


def _fetch_to_part(
    url: str, part: Path, *, timeout: float, chunk_size: int, progress: bool
) -> None:
    """One HTTP attempt that appends to (or restarts) ``part``; raises :class:`_Transient`."""
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "psp-mine"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        err.close()
        if err.code == 416 and offset:
            # Nothing left to send: the part is whole if the server's size agrees (a crash
            # between the last byte and the rename), otherwise it is stale and starts over.
            if err.headers.get("Content-Range", "") == f"bytes */{offset}":
                return
            part.unlink()
            raise _Transient(f"HTTP 416 for a resume at byte {offset}; restarting") from err
        if err.code in _RETRY_STATUS:
            raise _Transient(f"HTTP {err.code} {err.reason}") from err
        part.unlink(missing_ok=True)
        raise DownloadError(f"{url}: HTTP {err.code} {err.reason}") from err
    except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as err:
        raise _Transient(str(err)) from err
    with response:
        resumed = offset > 0 and response.status == 206
        if resumed and not response.headers.get("Content-Range", "").startswith(f"bytes {offset}-"):
            # A 206 for some other range than asked: appending would corrupt the file.
            part.unlink()
            raise _Transient(f"unexpected Content-Range {response.headers.get('Content-Range')!r}")
        if not resumed:
            offset = 0
        length = response.headers.get("Content-Length")
        total = offset + int(length) if length is not None else None
        with (
            open(part, "ab" if resumed else "wb", buffering=0) as out,
            tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                desc=part.name[: -len(".part")],
                disable=None if progress else True,
            ) as bar,
        ):
            while chunk := _read(response, chunk_size, out.tell()):
                _append(out, chunk, part)
                bar.update(len(chunk))
            size = out.tell()
    if total is not None and size != total:
        raise _Transient(f"connection closed at byte {size} of {total}")


def _read(response, size: int, at: int) -> bytes:
    """The next chunk of the body; a dropped connection is :class:`_Transient`."""
    try:
        return response.read(size)
    except (OSError, http.client.HTTPException) as err:
        raise _Transient(f"connection lost at byte {at}: {err!r}") from err


def _append(out, chunk: bytes, part: Path) -> None:
    """Write to the ``.part`` (unbuffered: a buffer would fail again when closed, naming no
    file). A refused write (a full disk) is final, not a dropped connection to retry, and the
    ``.part`` stays for a rerun to resume once there is room."""
    view = memoryview(chunk)
    try:
        while view:
            view = view[out.write(view) :]
    except OSError as err:
        raise write_error(part, err) from err


def upstream_via(url: str, prefix: str | None) -> str:
    """Where to fetch ``url`` from: itself, or under an HTTP mirror of the upstream hosts.

    A mirror at ``prefix`` holds each file at its host and path (the layout ``wget -x`` writes):
    ``https://host/path?query`` is fetched from ``{prefix}/host/path?query``.
    """
    if not prefix:
        return url
    _, sep, rest = url.partition("://")
    if not sep:
        raise SourceError(f"{url}: not an absolute URL, so it cannot be rewritten under {prefix}")
    return f"{prefix.rstrip('/')}/{rest}"


def fetch(
    source: Source, download_dir: str | os.PathLike, url_prefix: str | None = None, **kwargs
) -> list[Path]:
    """Download every file of ``source`` into ``download_dir/{source.id}/`` (or its shared
    :attr:`~psp.data.sources.registry.Source.download_folder`); returns the paths.

    With ``url_prefix``, each file comes from that HTTP mirror instead (:func:`upstream_via`),
    still saved under its upstream name and held to its upstream pin. Each file is checked
    against its pinned checksum, or else against ``downloads.lock.json`` in ``download_dir``
    (see :mod:`psp.data.sources.verify`); ``kwargs`` go to :func:`download`.
    """
    source.require_downloadable()
    folder = Path(download_dir) / (source.download_folder or source.id)
    lock = DownloadLock(download_dir)
    # Sources sharing a download_folder take turns on it: the second finds the first's file
    # instead of writing to the same .part.
    with holding(folder):
        return [
            download(
                upstream_via(url, url_prefix),
                folder / source.filename(url),
                sha256=source.sha256_of(url),
                lock=lock,
                origin=url,
                **kwargs,
            )
            for url in source.urls
        ]
