"""Where every data set comes from, how to fetch it, and how to turn it into the mirror layout.

The rest of the pipeline only reads the mirror layout (DESIGN §3). Three parts:

- :mod:`psp.sources.registry`: ``SOURCES``, keyed by the source's path in the mirror layout.
- :mod:`psp.sources.download`: resumable, retried, checksummed, atomic downloads.
- :mod:`psp.sources.importers`: one importer per upstream format; :func:`import_source`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from psp.io import atomic_open
from psp.sources.download import DownloadError, download, fetch, sha256_file
from psp.sources.importers import (
    import_opus_moses_zip,
    import_paranmt,
    import_semeval2017,
    import_senteval_sts,
    import_source,
    import_stsb,
    import_tatoeba,
)
from psp.sources.registry import (
    PAPER_LANGUAGES,
    SOURCES,
    STS17_TRACKS,
    STS_DATASETS,
    TATOEBA_LANGUAGES,
    Source,
    SourceError,
    resolve,
    select,
)

__all__ = [
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
    "import_opus_moses_zip",
    "import_paranmt",
    "import_semeval2017",
    "import_senteval_sts",
    "import_source",
    "import_stsb",
    "import_tatoeba",
    "resolve",
    "select",
    "sha256_file",
]


def fetch_and_import(
    source: Source,
    download_dir: str | os.PathLike,
    out_root: str | os.PathLike,
    manifest: str | os.PathLike,
    **options,
) -> dict[str, Any]:
    """Download ``source``, import it under ``out_root`` and write ``manifest`` last.

    The manifest (JSON: source id, URLs, the sha256 of every download and the files written) is
    what the workflow waits on, so a source counts as present only once all of it was imported.
    """
    downloaded = fetch(source, download_dir)
    written = import_source(source, downloaded, out_root, **options)
    record = {
        "source": source.id,
        "format": source.format,
        "downloads": [
            {"url": url, "path": str(path), "sha256": sha256_file(path)}
            for url, path in zip(source.urls, downloaded, strict=True)
        ],
        "files": [str(path) for path in written],
    }
    with atomic_open(manifest, "wt") as handle:
        json.dump(record, handle, indent=2)
    return record
