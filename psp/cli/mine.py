"""``psp mine``: mine parallel sentences from two text files with a P-SP model.

Example:
    psp mine --model results/models/es-en --src-file es.txt --tgt-file en.txt \
        --src-lang es --tgt-lang en --output mined/es-en.tsv.gz
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from psp.cli.options import finite_float, input_file, positive_int

log = logging.getLogger(__name__)

NAME = "mine"
HELP = "mine parallel sentences (margin-scored kNN) from two text files"


def register(subparsers) -> None:
    # For the defaults: importing psp.mine loads torch and Faiss, paid by `psp mine` alone.
    from psp.mine.config import MARGINS, RETRIEVALS, IndexConfig, MineConfig

    parser = subparsers.add_parser(
        NAME,
        help=HELP,
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    defaults = MineConfig()
    parser.add_argument("--model", required=True, type=Path, help="model directory (psp.load)")
    parser.add_argument(
        "--src-file", required=True, type=input_file, help="source sentences, one per line (.gz ok)"
    )
    parser.add_argument(
        "--tgt-file", required=True, type=input_file, help="target sentences, one per line (.gz ok)"
    )
    parser.add_argument("--output", required=True, type=Path, help="score<TAB>src<TAB>tgt .tsv.gz")
    parser.add_argument(
        "--src-lang", help="source language code, checked against the model's languages"
    )
    parser.add_argument(
        "--tgt-lang", help="target language code, checked against the model's languages"
    )
    parser.add_argument(
        "--k",
        type=positive_int,
        default=defaults.k,
        help="neighbours for the margin and candidates",
    )
    parser.add_argument("--margin", choices=MARGINS, default=defaults.margin)
    parser.add_argument("--retrieval", choices=RETRIEVALS, default=defaults.retrieval)
    parser.add_argument(
        "--threshold",
        type=finite_float,
        default=None,
        help="keep pairs scoring at least this (default: per margin)",
    )
    parser.add_argument(
        "--shards", type=positive_int, default=defaults.n_shards, help="embedding shards per side"
    )
    parser.add_argument(
        "--block-size", type=positive_int, default=defaults.block_size, help="rows per kNN block"
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=defaults.batch_size,
        help="sentences per embed call",
    )
    parser.add_argument("--float16", action="store_true", help="store embedding shards as float16")
    index = IndexConfig()
    parser.add_argument(
        "--ivf-min-size",
        type=positive_int,
        default=index.ivf_min_size,
        help="rows of the larger side from which inverted lists replace exact search "
        "(the measured crossover; docs/mining.md, Sizing)",
    )
    parser.add_argument(
        "--nprobe", type=positive_int, default=index.nprobe, help="lists probed per query"
    )
    parser.add_argument(
        "--nlist",
        type=positive_int,
        default=None,
        help="inverted lists (default: sqrt(nprobe x rows of the larger side))",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="shards and kNN parts, kept for reuse by a run with the same model, inputs and "
        "settings (default: <output>.work, removed on success or bad input; a rerun after a "
        "crash resumes there)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import psp
    from psp.io import InputError
    from psp.mine.config import IndexConfig, MineConfig
    from psp.mine.pipeline import check_model_languages, mine_files

    try:
        cfg = MineConfig(
            k=args.k,
            margin=args.margin,
            retrieval=args.retrieval,
            threshold=args.threshold,
            n_shards=args.shards,
            block_size=args.block_size,
            batch_size=args.batch_size,
            float16=args.float16,
            index=IndexConfig(ivf_min_size=args.ivf_min_size, nprobe=args.nprobe, nlist=args.nlist),
        )
    except ValueError as err:
        raise InputError(str(err)) from err
    if (args.src_lang is None) != (args.tgt_lang is None):
        raise InputError("--src-lang and --tgt-lang must be given together")
    model = psp.load(args.model)
    if args.src_lang:
        check_model_languages(model, args.src_lang, args.tgt_lang, args.model)
    stats = mine_files(
        model, args.src_file, args.tgt_file, cfg, args.output, args.work_dir, model_dir=args.model
    )
    print(f"kept {stats['kept']} of {stats['candidates']} candidates -> {args.output}")
    return 0
