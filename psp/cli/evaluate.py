"""``psp eval``: evaluate one or more embedders on STS / STS17 / Tatoeba, one directory each.

Example:
    psp eval --embedder psp:results/models/en --embedder st:all-MiniLM-L6-v2 \\
        --data ../shared/data --out results/eval --sts17 en-en es-en --tatoeba es fr
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from psp.cli.options import positive_int
from psp.io import FileRoles

NAME = "eval"
HELP = "evaluate embedders (STS 2012-16, STS-B, STS17, Tatoeba)"


def register(subparsers) -> None:
    from psp.evaluate.sts import STS17_TRACKS
    from psp.evaluate.tatoeba import TATOEBA_LANGUAGES

    parser = subparsers.add_parser(
        NAME,
        help=HELP,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--embedder",
        action="append",
        required=True,
        metavar="[NAME=]SPEC",
        help="psp:DIR, original:CKPT:SPM or st:NAME_OR_PATH; repeatable. NAME sets the output "
        "directory name (default: derived from SPEC)",
    )
    parser.add_argument("--data", required=True, help="data mirror root (holds sts/ and tatoeba/)")
    parser.add_argument("--out", required=True, help="writes OUT/NAME/ per embedder")
    parser.add_argument("--no-sts", action="store_true", help="skip STS 2012-16 and STS-B")
    parser.add_argument(
        "--sts17",
        nargs="*",
        default=list(STS17_TRACKS),
        metavar="TRACK",
        help=f"STS17 tracks (default: all; none with an empty list): {' '.join(STS17_TRACKS)}",
    )
    parser.add_argument(
        "--tatoeba",
        nargs="*",
        default=list(TATOEBA_LANGUAGES),
        metavar="LANG",
        help="Tatoeba languages, ISO 639-1 or Tatoeba codes (default: the paper's seven)",
    )
    parser.add_argument(
        "--floor", help="evaluation dir of an untrained model, shown as the floor in OUT/tables.md"
    )
    parser.add_argument(
        "--threads", type=positive_int, help="torch threads (default: torch's choice)"
    )
    parser.add_argument("--device", default="cpu")
    parser.set_defaults(func=run, file_roles=file_roles)


def file_roles(args: argparse.Namespace) -> FileRoles:
    """The embedders' files, the floor's tables and the evaluation sets are read; each
    embedder's tables and the side-by-side table written."""
    from psp.evaluate.harness import eval_files
    from psp.evaluate.peers import spec_files
    from psp.evaluate.results import TABLES

    read = [*(f"{table}.csv" for table in TABLES), "metrics.json"]  # of an evaluation folder
    out = Path(args.out)
    outputs = {"--out tables.md": out / "tables.md"}
    inputs = {}
    for name, spec in parse_embedders(args.embedder).items():
        for written in (*read, "tables.md"):
            outputs[f"--out {name}/{written}"] = out / name / written
        inputs |= {f"--embedder {spec}: {path}": path for path in spec_files(spec)}
    sets = {"sts": not args.no_sts, "sts17": args.sts17, "tatoeba": args.tatoeba}
    inputs |= {f"--data {path}": path for path in eval_files(Path(args.data), sets)}
    if args.floor:
        inputs |= {f"--floor {name}": Path(args.floor) / name for name in read}
    return FileRoles(outputs=outputs, inputs=inputs)


def parse_embedders(values: list[str]) -> dict[str, str]:
    """``[NAME=]SPEC`` arguments -> {name: spec}; duplicate names are an error."""
    from psp.evaluate.peers import spec_label

    named: dict[str, str] = {}
    for value in values:
        name, sep, spec = value.partition("=")
        if not sep or ":" in name:
            name, spec = spec_label(value), value
        if name in named:
            raise SystemExit(f"psp eval: two embedders are named {name!r}; use NAME=SPEC")
        named[name] = spec
    return named


def run(args: argparse.Namespace) -> int:
    from psp.evaluate.harness import evaluate_embedder
    from psp.evaluate.paper_tables import combine_tables
    from psp.evaluate.peers import PeerUnavailable, load_embedder
    from psp.io import atomic_open

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    out = Path(args.out)
    embedders = parse_embedders(args.embedder)
    for name, spec in embedders.items():
        try:
            result = evaluate_embedder(
                load_embedder(spec, device=args.device),
                args.data,
                out / name,
                sts=not args.no_sts,
                sts17_tracks=args.sts17,
                tatoeba_langs=args.tatoeba,
                name=name,
            )
        except (PeerUnavailable, FileNotFoundError, ValueError) as err:
            print(f"psp eval: {name}: {err}", file=sys.stderr)
            return 2
        metrics = result["metrics"]
        summary = [
            f"{key}={metrics[key]:.1f}"
            for key in (
                "sts_avg_pearson",
                "stsb_test_spearman",
                "sts17_avg_pearson",
                "tatoeba_avg_error",
            )
            if metrics.get(key) is not None
        ]
        print(f"{name}: {' '.join(summary)} -> {out / name}")
    if len(embedders) > 1 or args.floor:
        with atomic_open(out / "tables.md", "wt") as handle:
            handle.write(combine_tables({name: out / name for name in embedders}, floor=args.floor))
        print(f"side by side: {out / 'tables.md'}")
    return 0
