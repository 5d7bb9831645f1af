"""``psp export``: a model directory as a sentence-transformers or model2vec model directory.

The output loads offline with the library alone (``SentenceTransformer(DIR)``,
``StaticModel.from_pretrained(DIR)``) and embeds as ``psp embed`` does (see :mod:`psp.export`);
it carries the model's card (``README.md``) with the library's name and way of loading.

Example:
    psp export --model results/models/en --to sentence-transformers exported/psp-en-st
"""

from __future__ import annotations

import argparse
import os
import sys

from psp.cli.options import model_files
from psp.io import FileRoles

NAME = "export"
HELP = "write a model as a sentence-transformers or model2vec directory"


def run(args: argparse.Namespace) -> int:
    from psp.export import export_model

    out = export_model(args.model, args.out_dir, library=args.to)
    print(f"wrote {args.to} model to {out}", file=sys.stderr)
    return 0


def file_roles(args: argparse.Namespace) -> FileRoles:
    """The model directory (and its card) are read; the library's files written."""
    from psp.export import EXPORT_FILES

    return FileRoles(
        outputs={
            f"out_dir {name}": os.path.join(args.out_dir, name) for name in EXPORT_FILES[args.to]
        },
        inputs={
            **model_files(args.model, "--model"),
            "--model README.md": os.path.join(args.model, "README.md"),
        },
    )


def register(subparsers) -> None:
    from psp.export import LIBRARIES

    parser = subparsers.add_parser(NAME, help=HELP, description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="psp model directory")
    parser.add_argument("--to", required=True, choices=list(LIBRARIES), help="target library")
    parser.add_argument("out_dir", help="output directory (created; files in it are replaced)")
    parser.set_defaults(func=run, file_roles=file_roles)
