"""``psp mine``: mine parallel sentences from two corpus files with a P-SP model.

The corpora may be plain text, JSON Lines or Parquet (``--text-field``, ``--id-field``; text and
JSON Lines also ``.gz`` or ``.zst``). The pairs above the threshold go through the pair filters
(dedup, copies, language, length ratio, maximum score) and are written as TSV or Parquet, with
each side's input line and document id under ``--provenance``.

Example:
    psp mine --model results/models/es-en --src-file es.txt --tgt-file en.jsonl.zst \
        --src-lang es --tgt-lang en --output mined/es-en.tsv.gz
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

from psp.cli.options import add_key_flags, input_file, model_files
from psp.config_schema import config_keys, keys_at
from psp.io import FileRoles, InputError

log = logging.getLogger(__name__)

NAME = "mine"
HELP = "mine parallel sentences (margin-scored kNN) from two corpus files"
CORPUS_HELP = (
    "sentences: text, one per line, JSON Lines or Parquet (text and JSON Lines .gz or .zst ok)"
)


def register(subparsers) -> None:
    # For the keys: importing psp.mine loads torch and Faiss, paid by `psp mine` alone.
    from psp.mine.config import MINING_ENTRY, IndexConfig, MineConfig, PairFilterConfig
    from psp.mine.mined_table import FORMATS

    parser = subparsers.add_parser(
        NAME,
        help=HELP,
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--model", required=True, type=Path, help="model directory (psp.load)")
    parser.add_argument("--src-file", required=True, type=input_file, help=f"source {CORPUS_HELP}")
    parser.add_argument("--tgt-file", required=True, type=input_file, help=f"target {CORPUS_HELP}")
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        help="mined pairs: .tsv.gz (score<TAB>src<TAB>tgt) or, with --format parquet, .parquet",
    )
    parser.add_argument("--format", choices=FORMATS, default="tsv", help="output format")
    parser.add_argument(
        "--provenance",
        action="store_true",
        help="add each side's 1-based input line (row, for Parquet), src_line and tgt_line, and "
        "its document id with --id-field, src_id and tgt_id, after the other columns",
    )
    text_field = keys_at(MINING_ENTRY)["text_field"]
    add_key_flags(parser, {"text_field": text_field}, {"text_field": text_field.default})
    parser.add_argument(
        "--id-field",
        default=None,
        help="the field or column of JSON Lines or Parquet input holding a document id, for "
        "--provenance (a plain text side has none)",
    )
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
    filter_keys = parser.add_argument_group(
        "pair filters, applied to the pairs above the threshold (docs/mining.md)"
    )
    add_key_flags(filter_keys, config_keys(PairFilterConfig), PairFilterConfig().to_dict())
    parser.set_defaults(func=run, file_roles=file_roles)


def file_roles(args: argparse.Namespace) -> FileRoles:
    """The corpora and the model are read; the pairs, their stats and histogram written; the
    run's own work dir (without ``--work-dir``) removed at the end."""
    from psp.mine.pipeline import mined_outputs

    outputs = mined_outputs(args.output)
    return FileRoles(
        outputs={
            "--output": outputs["pairs"],
            "its stats": outputs["stats"],
            "its histogram": outputs["histogram"],
        },
        inputs={
            "--src-file": args.src_file,
            "--tgt-file": args.tgt_file,
            **model_files(args.model, "--model"),
        },
        cleared={"the run's work dir": outputs["work_dir"] if args.work_dir is None else None},
    )


def build_config(args: argparse.Namespace):
    """The :class:`MineConfig` of the flags given. The index settings are always there: inputs
    below ``ivf_min_size`` rows (geometric mean of the sides) are still searched exactly."""
    from psp.mine.config import IndexConfig, MineConfig, PairFilterConfig

    def given(cls) -> dict:
        return {key: getattr(args, key) for key in config_keys(cls) if hasattr(args, key)}

    try:
        return MineConfig(
            **given(MineConfig),
            index=IndexConfig(**given(IndexConfig)),
            filters=PairFilterConfig(**given(PairFilterConfig)),
        )
    except ValueError as err:
        raise InputError(str(err)) from err


def side_fields(args: argparse.Namespace, path: str):
    """How one side's file is read: ``--text-field``, and ``--id-field`` where the file has
    fields (plain text has none, so a plain text side gets no id column)."""
    from psp.data.sentence_files import Fields, format_of

    text = {"text": args.text_field} if hasattr(args, "text_field") else {}
    records = format_of(path).kind != "text"
    return Fields(**text, doc_id=args.id_field if records else None)


def check_output_name(args: argparse.Namespace) -> None:
    """Refuse an output whose name says the other format (``.parquet`` written as TSV)."""
    parquet = args.output.name.endswith(".parquet")
    if parquet != (args.format == "parquet"):
        raise InputError(
            f"{args.output}: the name says {'Parquet' if parquet else 'TSV'} but --format is "
            f"{args.format}; name a Parquet output .parquet and a TSV one .tsv or .tsv.gz"
        )


def run(args: argparse.Namespace) -> int:
    from psp.data.sentence_files import check_file
    from psp.mine.pipeline import check_model_languages, mine_files
    from psp.model.torch_model import load

    cfg = build_config(args)
    check_output_name(args)
    if args.id_field and not args.provenance:
        raise InputError("--id-field names the document ids of --provenance; give both")
    if (args.src_lang is None) != (args.tgt_lang is None):
        raise InputError("--src-lang and --tgt-lang must be given together")
    fields = tuple(side_fields(args, path) for path in (args.src_file, args.tgt_file))
    for path, side in zip((args.src_file, args.tgt_file), fields, strict=True):
        check_file(path, side)
    model = load(args.model)
    languages = None
    if args.src_lang:
        check_model_languages(model, args.src_lang, args.tgt_lang, args.model)
        languages = (args.src_lang, args.tgt_lang)
    stats = mine_files(
        model,
        args.src_file,
        args.tgt_file,
        cfg=cfg,
        out_path=args.output,
        work_dir=args.work_dir,
        model_dir=args.model,
        fields=fields,
        languages=languages,
        provenance=args.provenance,
        out_format=args.format,
    )
    print(f"kept {stats['kept']} of {stats['candidates']} candidates -> {args.output}")
    return 0
