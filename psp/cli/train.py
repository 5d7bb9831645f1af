"""``psp train``: train a P-SP model from a training HDF5 file and its SentencePiece model."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from psp.cli.options import (
    fraction,
    input_file,
    non_negative_int,
    positive_float,
    positive_int,
)
from psp.io import InputError

NAME = "train"


def input_path(text: str) -> Path:
    return Path(input_file(text))


HELP = "train a P-SP model"

# Flags that override single config values: (flag, config key, type).
_OVERRIDES = [
    ("--epochs", "epochs", positive_int),
    ("--dim", "dim", positive_int),
    ("--batch-size", "batch_size", positive_int),
    ("--megabatch-size", "megabatch_size", positive_int),
    ("--lr", "lr", positive_float),
    ("--dropout", "dropout", fraction),
    ("--max-steps", "max_steps", positive_int),
    ("--seed", "seed", non_negative_int),
    ("--device", "device", str),
    ("--threads", "threads", positive_int),
]


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        NAME,
        help=HELP,
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--h5", required=True, type=input_path, help="training pairs (psp.hdf5 layout)"
    )
    parser.add_argument(
        "--spm", required=True, type=input_path, help="SentencePiece model of the h5"
    )
    parser.add_argument("--model-dir", required=True, type=Path, help="output model directory")
    parser.add_argument(
        "--work-dir", required=True, type=Path, help="log, learning curve, checkpoints"
    )
    parser.add_argument("--config", type=input_path, help="YAML or JSON file of TrainConfig values")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    parser.add_argument(
        "--dense", action="store_true", help="dense Adam instead of the lazy sparse one"
    )
    for flag, key, kind in _OVERRIDES:
        parser.add_argument(flag, dest=key, type=kind, default=None, help=f"override {key}")
    parser.set_defaults(func=run)


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


def run(args: argparse.Namespace) -> int:
    from psp.train import TrainConfig, train

    values = load_config(args.config)
    values.update(
        {key: getattr(args, key) for _, key, _ in _OVERRIDES if getattr(args, key) is not None}
    )
    if args.dense:
        values["sparse"] = False
    try:
        cfg = TrainConfig.from_dict(values)
    except ValueError as err:
        raise InputError(f"{args.config or 'command line'}: {err}") from err
    model_dir = train(cfg, args.h5, args.spm, args.model_dir, args.work_dir, resume=args.resume)
    print(json.dumps({"model_dir": str(model_dir), **dataclasses.asdict(cfg)}))
    return 0
