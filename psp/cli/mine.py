"""``psp mine``: mine parallel sentences from two text files with a P-SP model.

Example:
    psp mine --model results/models/es-en --src-file es.txt --tgt-file en.txt \
        --src-lang es --tgt-lang en --output mined/es-en.tsv.gz
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

from psp.cli.options import add_key_flags, input_file
from psp.config_schema import config_keys
from psp.io import InputError

log = logging.getLogger(__name__)

NAME = "mine"
HELP = "mine parallel sentences (margin-scored kNN) from two text files"


def register(subparsers) -> None:
    # For the keys: importing psp.mine loads torch and Faiss, paid by `psp mine` alone.
    from psp.mine.config import IndexConfig, MineConfig

    parser = subparsers.add_parser(
        NAME,
        help=HELP,
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
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
        "--work-dir",
        type=Path,
        default=None,
        help="shards and kNN parts, kept for reuse by a run with the same model, inputs and "
        "settings (default: <output>.work, removed on success or bad input; a rerun after a "
        "crash resumes there)",
    )
    # One flag per mining key, declared in psp/config.schema.yaml like the workflow's.
    mine_keys = parser.add_argument_group("mining keys")
    add_key_flags(
        mine_keys,
        config_keys(MineConfig),
        dataclasses.asdict(MineConfig()),
        flags={"n_shards": "--shards"},
    )
    index_keys = parser.add_argument_group(
        "IVF search keys (a pair below --ivf-min-size rows is searched exactly)"
    )
    add_key_flags(index_keys, config_keys(IndexConfig), dataclasses.asdict(IndexConfig()))
    parser.set_defaults(func=run)


def build_config(args: argparse.Namespace):
    """The :class:`MineConfig` of the flags given. The index settings are always there: inputs
    below ``ivf_min_size`` rows (geometric mean of the sides) are still searched exactly."""
    from psp.mine.config import IndexConfig, MineConfig

    def given(cls) -> dict:
        return {key: getattr(args, key) for key in config_keys(cls) if hasattr(args, key)}

    index = given(IndexConfig)
    try:
        return MineConfig(
            **given(MineConfig),
            index=IndexConfig(**index),
        )
    except ValueError as err:
        raise InputError(str(err)) from err


def run(args: argparse.Namespace) -> int:
    import psp
    from psp.mine.pipeline import check_model_languages, mine_files

    cfg = build_config(args)
    if (args.src_lang is None) != (args.tgt_lang is None):
        raise InputError("--src-lang and --tgt-lang must be given together")
    model = psp.load(args.model)
    if args.src_lang:
        check_model_languages(model, args.src_lang, args.tgt_lang, args.model)
    stats = mine_files(
        model,
        args.src_file,
        args.tgt_file,
        cfg=cfg,
        out_tsv_gz=args.output,
        work_dir=args.work_dir,
        model_dir=args.model,
    )
    print(f"kept {stats['kept']} of {stats['candidates']} candidates -> {args.output}")
    return 0
