"""``psp convert-original``: import an original released P-SP checkpoint.

Unpickles the checkpoint (the original format needs it; see :mod:`psp.model.original`), so use it
only on files from a source you trust. The result is an ordinary pickle-free model directory.

Example:
    psp convert-original model.para.lc.100.pt paranmt.model results/models/paranmt-original
"""

from __future__ import annotations

import argparse

from psp.cli.options import model_files
from psp.io import FileRoles

NAME = "convert-original"
HELP = "convert an original P-SP checkpoint (.pt + SentencePiece model) to a model dir"


def run(args: argparse.Namespace) -> int:
    from psp.model.original import convert_original

    convert_original(args.ckpt, args.spm, args.out_dir, float16=args.float16)
    return 0


def file_roles(args: argparse.Namespace) -> FileRoles:
    """The checkpoint and SentencePiece model are read; the model directory's files written."""
    return FileRoles(
        outputs=model_files(args.out_dir, "out_dir"), inputs={"ckpt": args.ckpt, "spm": args.spm}
    )


def register(subparsers) -> None:
    parser = subparsers.add_parser(NAME, help=HELP, description=__doc__.splitlines()[0])
    parser.add_argument("ckpt", help="original torch.save checkpoint (.pt); it is unpickled")
    parser.add_argument("spm", help="the SentencePiece .model the checkpoint was trained with")
    parser.add_argument("out_dir", help="output model directory")
    parser.add_argument("--float16", action="store_true", help="store float16 weights")
    parser.set_defaults(func=run, file_roles=file_roles)
