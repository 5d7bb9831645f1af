"""Streaming HTTP download that resumes a ``.part`` file with ``Range``, retries transient
failures, checks sha256 and renames atomically."""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from tqdm import tqdm

from psp.sources.registry import Source, SourceError, _mirror_only_message

log = logging.getLogger(__name__)


class DownloadError(RuntimeError):
    """A download failed for good: the message names the URL and the reason."""


# --------------------------------------------------------------------------------------------
# Download

_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class _Transient(Exception):
    """A failure worth retrying (connection dropped, timeout, 5xx)."""


def sha256_file(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def download(
    url: str,
    dest: str | os.PathLike,
    sha256: str | None = None,
    retries: int = 3,
    timeout: float = 60,
    chunk_size: int = 1 << 20,
    progress: bool = True,
    backoff: float = 2.0,
) -> Path:
    """Fetch ``url`` to ``dest``; resumable, retried, checksum-verified, atomic.

    Bytes go to ``dest.part`` first. A ``.part`` left by an earlier attempt (or an earlier run)
    is continued with ``Range: bytes=N-``; a server that answers 200 instead of 206 sends the
    whole file, so the part is restarted. Connection errors, truncated bodies and 5xx answers
    are retried ``retries`` times with exponential backoff, keeping the ``.part``. A checksum
    mismatch or a client error (404...) removes the ``.part`` and raises :class:`DownloadError`:
    nothing is left behind, and ``dest`` only ever appears complete and verified.

    Returns ``dest``; an existing ``dest`` with the right checksum is kept as is.
    """
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    if dest.exists():
        if sha256 is None or sha256_file(dest) == sha256:
            return dest
        log.warning("%s: checksum differs from the registry, downloading again", dest)
        dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(retries + 1):
        try:
            _fetch_to_part(url, part, timeout, chunk_size, progress)
            break
        except _Transient as err:
            if attempt == retries:
                raise DownloadError(
                    f"{url}: giving up after {retries + 1} attempts: {err}"
                ) from err
            wait = backoff * 2**attempt
            log.warning("%s: %s; retrying in %.1f s", url, err, wait)
            time.sleep(wait)
    if sha256 is not None:
        actual = sha256_file(part)
        if actual != sha256:
            part.unlink()
            raise DownloadError(f"{url}: sha256 mismatch: expected {sha256}, got {actual}")
    os.replace(part, dest)
    return dest


def _fetch_to_part(url: str, part: Path, timeout: float, chunk_size: int, progress: bool) -> None:
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
            open(part, "ab" if resumed else "wb") as out,
            tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                desc=part.name[: -len(".part")],
                disable=None if progress else True,
            ) as bar,
        ):
            try:
                while chunk := response.read(chunk_size):
                    out.write(chunk)
                    bar.update(len(chunk))
            except (OSError, http.client.HTTPException) as err:
                raise _Transient(f"connection lost at byte {out.tell()}: {err!r}") from err
            size = out.tell()
    if total is not None and size != total:
        raise _Transient(f"connection closed at byte {size} of {total}")


def fetch(source: Source, download_dir: str | os.PathLike, **kwargs) -> list[Path]:
    """Download every file of ``source`` into ``download_dir/{source.id}/``; returns the paths.

    Each file is checked against its pinned checksum, if any; ``kwargs`` go to :func:`download`.
    """
    if source.format == "github-raw":
        raise SourceError(_mirror_only_message(source))
    folder = Path(download_dir) / source.id
    sums = {**source.checksums, source.url: source.sha256}
    return [
        download(url, folder / url.rsplit("/", 1)[-1], sha256=sums.get(url), **kwargs)
        for url in source.urls
    ]
