"""``psp convert-original``: import an original released P-SP checkpoint.

Unpickles the checkpoint (the original format needs it; see :mod:`psp.convert`), so use it only
on files from a source you trust. The result is an ordinary pickle-free model directory.

Example:
    psp convert-original model.para.lc.100.pt paranmt.model results/models/paranmt-original
"""

from __future__ import annotations

import argparse

NAME = "convert-original"
HELP = "convert an original P-SP checkpoint (.pt + SentencePiece model) to a model dir"


def run(args: argparse.Namespace) -> int:
    from psp.convert import convert_original

    convert_original(args.ckpt, args.spm, args.out_dir, float16=args.float16)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(NAME, help=HELP, description=__doc__.splitlines()[0])
    parser.add_argument("ckpt", help="original torch.save checkpoint (.pt); it is unpickled")
    parser.add_argument("spm", help="the SentencePiece .model the checkpoint was trained with")
    parser.add_argument("out_dir", help="output model directory")
    parser.add_argument("--float16", action="store_true", help="store float16 weights")
    parser.set_defaults(func=run)
