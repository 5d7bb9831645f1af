"""``psp score``: append the cosine similarity of each ``sent1<TAB>sent2`` line.

Each input line is echoed unchanged with ``<TAB>{cosine:.6f}`` appended, so the output lines up
with the input for any downstream tool. Lines stream through in batches: memory is a few
batches whatever the input size, and tokenising overlaps pooling and writing (see
:mod:`psp.cli.streaming`). Like ``psp embed`` it never imports torch. A file output appears
only once complete; on stdout, a reader that stops early (``| head``) ends the command quietly.

Example:
    psp score --model results/models/es-en --input pairs.tsv --output scored.tsv
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from psp.cli.options import add_model_stream_arguments
from psp.cli.streaming import STDIN, iter_input_batches, overlapped
from psp.io import InputError, atomic_open

NAME = "score"
HELP = "cosine similarity of sentence pairs (sent1<TAB>sent2 per line)"


def split_pair(line: str, where: str) -> tuple[str, str]:
    fields = line.split("\t")
    if len(fields) != 2:
        raise InputError(f"{where}: expected 2 tab-separated fields, found {len(fields)}")
    return fields[0], fields[1]


def score_lines(model, path: str, out, *, batch_size: int, threads: int) -> int:
    """Score every line of ``path`` into the text stream ``out``; returns the number of pairs."""
    import numpy as np

    from psp.model.pooling import row_cosines

    name = "<stdin>" if path == STDIN else path
    pooled = [np.empty((batch_size, model.dim), dtype=np.float32) for _ in range(2)]
    pairs = 0

    def encode(batch: tuple[int, list[str]]):
        first, lines = batch
        fields = [split_pair(line, f"{name}:{first + i}") for i, line in enumerate(lines)]
        sides = list(zip(*fields))
        return lines, [model.encoder.encode(side, num_threads=threads) for side in sides]

    def pool_and_write(item) -> None:
        nonlocal pairs
        lines, encoded = item
        n = len(lines)
        a, b = (
            model.pool(ids, offsets, rows[:n], threads)
            for (ids, offsets), rows in zip(encoded, pooled)
        )
        cosines = row_cosines(a, b)
        out.writelines(f"{line}\t{cos:.6f}\n" for line, cos in zip(lines, cosines))
        pairs += n

    overlapped(map(encode, iter_input_batches(path, batch_size)), pool_and_write)
    out.flush()  # here, so a reader that went away shows up as BrokenPipeError (see psp.cli)
    return pairs


def run(args: argparse.Namespace) -> int:
    from psp.model.pooling import default_threads, load_table_model

    model = load_table_model(args.model)
    threads = args.threads or default_threads()
    with contextlib.ExitStack() as stack:
        if args.output == STDIN:
            out = sys.stdout
        else:
            out = stack.enter_context(atomic_open(args.output, "wt"))
        n = score_lines(model, args.input, out, batch_size=args.batch_size, threads=threads)
    print(f"scored {n} pairs", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(NAME, help=HELP, description=__doc__.splitlines()[0])
    add_model_stream_arguments(
        parser,
        input_help="sent1<TAB>sent2 lines (.gz ok, - for stdin)",
        output_help="input lines + <TAB>cosine (- for stdout)",
        batch_help="pairs per batch",
    )
    parser.set_defaults(func=run)
