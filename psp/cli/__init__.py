"""The ``psp`` command. Each subcommand lives in its own module with a ``register(subparsers)``.

Adding a command means adding a module to ``COMMANDS``; nothing else here changes.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from psp.io import InputError

COMMANDS = ["embed", "score", "convert", "train", "evaluate", "mine", "data"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="psp",
        description="P-SP sentence embeddings: embed, score, train, evaluate, mine bitext.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"psp.cli.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"psp.cli.{name}":
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except InputError as err:
        print(f"psp {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
