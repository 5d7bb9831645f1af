"""Where every data set comes from, how to fetch it, and how to turn it into the mirror layout.

The rest of the pipeline only reads the mirror layout (docs/design.md §3). Three parts:

- :mod:`psp.data.sources.registry`: ``SOURCES``, keyed by the source's path in the mirror layout.
- :mod:`psp.data.sources.download`: resumable, retried, checksummed, atomic downloads, from upstream
  or from an HTTP mirror of it (``source_url_prefix``).
- :mod:`psp.data.sources.pins`: the published sha256 of upstream files.
- :mod:`psp.data.sources.importers`: one importer per upstream format; :func:`import_source`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from psp.data.sources.download import (
    DownloadError,
    download,
    fetch,
    set_aside,
    sha256_file,
    upstream_via,
)
from psp.data.sources.importers import (
    import_bucc2018,
    import_opus_moses_zip,
    import_paranmt,
    import_semeval2017,
    import_senteval_sts,
    import_source,
    import_stsb,
    import_tatoeba,
    import_xnli,
)
from psp.data.sources.registry import (
    BUCC_LANGUAGES,
    BUCC_SPLITS,
    PAPER_LANGUAGES,
    SOURCES,
    STS17_TRACKS,
    STS_DATASETS,
    TATOEBA_LANGUAGES,
    Source,
    SourceError,
    resolve,
    select,
    with_pins,
)
from psp.data.sources.verify import DownloadLock
from psp.io import InputError, atomic_open

__all__ = [
    "BUCC_LANGUAGES",
    "BUCC_SPLITS",
    "PAPER_LANGUAGES",
    "SOURCES",
    "STS17_TRACKS",
    "STS_DATASETS",
    "TATOEBA_LANGUAGES",
    "DownloadError",
    "Source",
    "SourceError",
    "download",
    "fetch",
    "fetch_and_import",
    "import_bucc2018",
    "import_downloads",
    "import_opus_moses_zip",
    "import_paranmt",
    "import_semeval2017",
    "import_senteval_sts",
    "import_source",
    "import_stsb",
    "import_tatoeba",
    "import_xnli",
    "resolve",
    "select",
    "sha256_file",
    "upstream_via",
    "with_pins",
]


def fetch_and_import(
    source: Source,
    download_dir: str | os.PathLike,
    out_root: str | os.PathLike,
    *,
    manifest: str | os.PathLike,
    url_prefix: str | None = None,
    **options,
) -> dict[str, Any]:
    """Download ``source`` (from the HTTP mirror ``url_prefix`` if given, see
    :func:`upstream_via`), import it under ``out_root`` and write ``manifest`` last.

    The manifest (JSON: source id, URLs, the sha256 of every download and the files written) is
    what the workflow waits on, so a source counts as present only once all of it was imported.
    """
    downloaded = fetch(source, download_dir, url_prefix=url_prefix)
    written = import_downloads(source, downloaded, download_dir, out_root, **options)
    record = {
        "source": source.id,
        "format": source.format,
        "downloads": [
            {
                "url": url,
                "fetched_from": upstream_via(url, url_prefix),
                "path": str(path),
                "sha256": sha256_file(path),
                "pinned": source.sha256_of(url) is not None,
            }
            for url, path in zip(source.urls, downloaded, strict=True)
        ],
        "files": [str(path) for path in written],
    }
    with atomic_open(manifest, "wt") as handle:
        json.dump(record, handle, indent=2)
    return record


def import_downloads(
    source: Source,
    downloaded: list[Path],
    download_dir: str | os.PathLike,
    out_root: str | os.PathLike,
    **options,
) -> list[Path]:
    """:func:`import_source` on what :func:`fetch` returned; a download that fails to import is
    set aside (``.rejected``, its lock entry dropped) so that the next run fetches it again.

    A file can pass every check of :mod:`psp.data.sources.verify` and still not be the data set (a
    different archive under the same URL); without this, every rerun would find it on disk,
    make no request and fail the same way.
    """
    try:
        return import_source(source, downloaded, out_root, **options)
    except InputError as err:
        lock = DownloadLock(download_dir)
        moved = [set_aside(path, url, lock) for url, path in zip(source.urls, downloaded)]
        raise InputError(
            f"{err}\n{source.id}: the download does not import; moved it aside to "
            f"{', '.join(map(str, moved[:3]))}{' ...' if len(moved) > 3 else ''}: the next run "
            "downloads it again"
        ) from err
