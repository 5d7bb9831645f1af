"""``psp data``: list the registered sources, download them, and import them into the mirror layout."""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from psp.cli.options import input_file, non_negative_int, positive_float, positive_int
from psp.io import FileRoles

if TYPE_CHECKING:
    from psp.data import sources

log = logging.getLogger(__name__)

NAME = "data"
HELP = "list, download and import data sources"

_NO_CAP = -1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(NAME, help=HELP)
    commands = parser.add_subparsers(dest="data_command", required=True)

    listing = commands.add_parser("list", help="registered sources under an id prefix")
    listing.add_argument("prefix", nargs="?", default="", help="e.g. bitext/es-en, sts, tatoeba")
    listing.set_defaults(func=_reported(_list))

    fetch = commands.add_parser("download", help="download and import sources into DATA_ROOT")
    fetch.add_argument("prefixes", nargs="+", help="source ids or id prefixes")
    fetch.add_argument("--out", type=Path, required=True, help="data root to import into")
    fetch.add_argument("--downloads", type=Path, required=True, help="where raw downloads are kept")
    _add_cap(fetch)
    fetch.add_argument("--retries", type=non_negative_int, default=3)
    fetch.add_argument("--timeout", type=positive_float, default=60, help="seconds per request")
    fetch.add_argument(
        "--url-prefix",
        help="an HTTP mirror of the upstream hosts: https://host/path is fetched from "
        "PREFIX/host/path (the workflow's source_url_prefix)",
    )
    fetch.set_defaults(func=_reported(_download), file_roles=_download_roles)

    imp = commands.add_parser("import", help="import already downloaded files of one source")
    imp.add_argument("source", help="source id, e.g. sts/sts17")
    imp.add_argument(
        "files", nargs="+", type=input_file, help="the downloaded file(s), in registry order"
    )
    imp.add_argument("--out", type=Path, required=True, help="data root to import into")
    _add_cap(imp)
    imp.set_defaults(func=_reported(_import), file_roles=_import_roles)


def _imported(chosen, out: Path) -> dict[str, Path]:
    """The files importing the sources ``chosen`` writes under ``out``."""
    return {f"{source.id}: {name}": out / name for source in chosen for name in source.outputs}


def _download_roles(args: argparse.Namespace) -> FileRoles:
    """The downloads are written, then read to import them into ``--out``."""
    from psp.data import sources

    try:
        chosen = [s for prefix in args.prefixes for s in sources.select(prefix)]
    except sources.SourceError:
        return FileRoles(outputs={}, inputs={})  # the command reports the unknown id
    return FileRoles(
        outputs=_imported(chosen, args.out),
        inputs={
            f"{source.id} download {url}": args.downloads
            / (source.download_folder or source.id)
            / source.filename(url)
            for source in chosen
            for url in source.urls
        },
    )


def _import_roles(args: argparse.Namespace) -> FileRoles:
    """The downloaded files are read and imported into ``--out``."""
    from psp.data import sources

    source = sources.SOURCES.get(args.source)
    return FileRoles(
        outputs=_imported([source] if source else [], args.out),
        inputs={f"files {i}": path for i, path in enumerate(args.files, 1)},
    )


def _add_cap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-pairs",
        type=_cap,
        default=None,
        help="OPUS pair cap (default: the registry's; -1 imports everything)",
    )


def _cap(text: str) -> int:
    return _NO_CAP if text == str(_NO_CAP) else positive_int(text)


def _options(args: argparse.Namespace, source: sources.Source) -> dict:
    if args.max_pairs is None or source.format != "opus-moses-zip":
        return {}
    return {"max_pairs": None if args.max_pairs == _NO_CAP else args.max_pairs}


def _reported(func):
    """Print download and registry errors as one line, the way ``psp`` reports bad input."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        from psp.data import sources

        try:
            return func(args)
        except (sources.DownloadError, sources.SourceError) as err:
            print(f"psp data: error: {err}", file=sys.stderr)
            return 2

    return run


def _list(args: argparse.Namespace) -> int:
    from psp.data import sources

    chosen = sources.select(args.prefix) if args.prefix else sources.SOURCES.values()
    for source in chosen:
        print(f"{source.id}\t{source.format}\t{source.url}")
    return 0


def _download(args: argparse.Namespace) -> int:
    from psp.data import sources

    chosen = [s for prefix in args.prefixes for s in sources.select(prefix)]
    for source in chosen:
        paths = sources.fetch(
            source,
            args.downloads,
            url_prefix=args.url_prefix,
            retries=args.retries,
            timeout=args.timeout,
        )
        options = _options(args, source)
        written = sources.import_downloads(source, paths, args.downloads, args.out, **options)
        log.info("%s: %d file(s) under %s", source.id, len(written), args.out)
    return 0


def _import(args: argparse.Namespace) -> int:
    from psp.data import sources

    source = sources.SOURCES.get(args.source)
    if source is None:
        sources.select(args.source)  # raises with the known groups
        raise sources.SourceError(f"{args.source} is a group; import one source at a time")
    written = sources.import_source(source, args.files, args.out, **_options(args, source))
    for path in written:
        print(path)
    return 0
