"""``psp speed``: the paper's Table 5 outside the workflow: sentences/s on 1 thread and on
``--threads``, load time and peak RSS of each model and peer, each in a fresh pinned process,
beside its STS average where ``--eval-root`` holds its evaluation.

Writes ``OUT/speed.csv`` and ``OUT/speed_quality.png`` and prints the rows as CSV.

Example:
    psp speed --data ../shared/data --model results/models/en --peer m2v:tokenlearn-static-model \\
        --threads 2 --out results/speed
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from psp.cli.options import positive_int
from psp.io import FileRoles

NAME = "speed"
HELP = "time encoders (Table 5): sentences/s, load time, peak RSS"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        NAME,
        help=HELP,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", required=True, help="the data mirror's root (English news)")
    parser.add_argument(
        "--model", action="append", default=[], help="our model directory; repeatable"
    )
    parser.add_argument(
        "--peer", action="append", default=[], help="a peer spec, e.g. st:NAME; repeatable"
    )
    parser.add_argument(
        "--eval-root",
        default="results/eval",
        help="evaluations for the STS average: ROOT/MODEL, ROOT/peers/PEER (default: %(default)s)",
    )
    parser.add_argument(
        "--sentences", type=positive_int, default=120_000, help="default: %(default)s"
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=os.cpu_count() or 1,
        help="the second setting beside 1 thread (default: the CPUs, %(default)s)",
    )
    parser.add_argument("--out", default="results/speed", help="default: %(default)s")
    parser.set_defaults(func=run, file_roles=file_roles)


def file_roles(args: argparse.Namespace) -> FileRoles:
    """The news sentences and the encoders' files are read; the table and its plot written."""
    from psp.evaluate.peers import spec_files
    from psp.evaluate.speed import NEWS_FILES

    specs = [f"psp:{model}" for model in args.model] + args.peer
    return FileRoles(
        outputs={name: Path(args.out) / name for name in ("speed.csv", "speed_quality.png")},
        inputs={
            **{f"--data {name}": Path(args.data) / name for name in NEWS_FILES},
            **{f"{spec}: {path}": path for spec in specs for path in spec_files(spec)},
        },
    )


def run(args: argparse.Namespace) -> int:
    import csv
    import sys

    from psp.evaluate.speed import (
        COLUMNS,
        NEWS_FILES,
        encoder_table,
        measure_speed,
        speed_sentences,
    )
    from psp.report.figures import plot_speed_quality

    if not args.model and not args.peer:
        raise SystemExit("psp speed: nothing to measure: give --model and/or --peer")
    if not Path(args.data).is_dir():
        raise SystemExit(f"psp speed: --data {args.data}: no such directory")
    out = Path(args.out)
    sentences = speed_sentences([Path(args.data) / name for name in NEWS_FILES], args.sentences)
    encoders = encoder_table(args.model, args.peer, args.eval_root)
    rows = measure_speed(encoders, sentences, args.threads, out / "speed.csv")
    plot_speed_quality(rows, out / "speed_quality.png")
    csv.DictWriter(sys.stdout, COLUMNS, lineterminator="\n").writerows(rows)
    return 0
