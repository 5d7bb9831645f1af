"""``psp train``: train a P-SP model from a training HDF5 file and its SentencePiece model.

Every training key (:class:`psp.train.TrainConfig`) has a flag, made from the key's declaration
in ``psp/config.schema.yaml``, so names, defaults and ranges are those of the config file and
the workflow.
Values come from the defaults, then ``--config``, then the flags. After each epoch the model is
scored on STS-B dev (``--data``, else ``$PSP_SHARED_DATA``), which picks the exported epoch;
``--no-eval`` trains without it (and exports the last epoch).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path

from psp.cli.options import add_key_flags, input_file, model_files
from psp.config_schema import config_keys
from psp.io import FileRoles, InputError

NAME = "train"
HELP = "train a P-SP model"
#: The evaluation set read after each epoch, under ``--data``.
STSB_DEV = "sts/stsb/dev.tsv"


def input_path(text: str) -> Path:
    return Path(input_file(text))


def register(subparsers) -> None:
    from psp.train.config import TrainConfig

    parser = subparsers.add_parser(
        NAME,
        help=HELP,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--h5", required=True, type=input_path, help="training pairs (psp.data.pairs_store layout)"
    )
    parser.add_argument(
        "--spm", required=True, type=input_path, help="SentencePiece model of the h5"
    )
    parser.add_argument("--model-dir", required=True, type=Path, help="output model directory")
    parser.add_argument(
        "--work-dir", required=True, type=Path, help="log, learning curve, checkpoints"
    )
    parser.add_argument("--config", type=input_path, help="YAML or JSON file of training keys")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    parser.add_argument(
        "--data",
        type=Path,
        default=os.environ.get("PSP_SHARED_DATA"),
        help=f"data mirror holding {STSB_DEV} for the per-epoch evaluation "
        "(default: $PSP_SHARED_DATA)",
    )
    parser.add_argument(
        "--no-eval", action="store_true", help="no per-epoch evaluation: export the last epoch"
    )
    keys = parser.add_argument_group("training keys (default: the config file's, else shown)")
    add_key_flags(keys, config_keys(TrainConfig), dataclasses.asdict(TrainConfig()))
    parser.set_defaults(func=run, file_roles=file_roles)


def file_roles(args: argparse.Namespace) -> FileRoles:
    """The pairs, their SentencePiece model, the config and the dev set are read; the model
    directory's files, the log and the learning curve written."""
    return FileRoles(
        outputs={
            **model_files(args.model_dir, "--model-dir"),
            "--work-dir train_log.tsv": args.work_dir / "train_log.tsv",
            "--work-dir learning_curve.png": args.work_dir / "learning_curve.png",
        },
        inputs={
            "--h5": args.h5,
            "--spm": args.spm,
            "--config": args.config,
            "--data dev set": None if args.no_eval or args.data is None else args.data / STSB_DEV,
        },
    )


def load_config(path: Path | None) -> dict:
    """Read a YAML (``.yaml``/``.yml``) or JSON config file into a dict."""
    if path is None:
        return {}
    import yaml

    text = path.read_text(encoding="utf-8")
    try:
        values = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
    except (ValueError, yaml.YAMLError) as err:
        raise InputError(f"{path}: cannot parse training config: {err}") from err
    values = {} if values is None else values
    if not isinstance(values, dict):
        raise InputError(f"{path}: a training config must be a mapping of keys to values")
    return values


def build_config(args: argparse.Namespace):
    """The config file's values (checked on their own, so an error names the file), then the
    flags given on the command line."""
    from psp.train import TrainConfig

    values = load_config(args.config)
    try:
        TrainConfig.from_dict(values, str(args.config))
    except ValueError as err:
        raise InputError(str(err)) from err
    for key in TrainConfig.__dataclass_fields__:
        if hasattr(args, key):  # given on the command line (``none`` included)
            values[key] = getattr(args, key)
    return TrainConfig.from_dict(values, "command line")


def build_evaluator(args: argparse.Namespace):
    """STS-B dev from the data mirror, or ``None`` with ``--no-eval``."""
    if args.no_eval:
        return None
    if args.data is None:
        raise InputError(
            f"no evaluation data: pass --data MIRROR (holding {STSB_DEV}), "
            "set PSP_SHARED_DATA, or train with --no-eval"
        )
    from psp.evaluate import StsbEvaluator

    try:
        return StsbEvaluator.from_dir(args.data, splits=("dev",))
    except FileNotFoundError as err:
        raise InputError(f"{err}; pass another --data or train with --no-eval") from err


def run(args: argparse.Namespace) -> int:
    from psp.train import train

    cfg = build_config(args)
    evaluator = build_evaluator(args)
    model_dir = train(
        cfg,
        args.h5,
        args.spm,
        model_dir=args.model_dir,
        work_dir=args.work_dir,
        resume=args.resume,
        evaluator=evaluator,
    )
    print(json.dumps({"model_dir": str(model_dir), **cfg.to_dict()}))
    return 0
