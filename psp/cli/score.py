"""``psp score``: append the cosine similarity of each ``sent1<TAB>sent2`` line.

Each input line is echoed unchanged with ``<TAB>{cosine:.6f}`` appended, so the output lines up
with the input for any downstream tool. Lines are read, scored and written in batches (memory is
one batch); a file output appears only once complete.

Example:
    psp score --model results/models/es-en --input pairs.tsv --output scored.tsv
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator

from psp.cli.embed import STDIN, iter_batches
from psp.io import InputError, atomic_open, iter_lines


def iter_input_lines(spec: str) -> Iterator[tuple[int, str]]:
    """``(line_number, text)`` of a UTF-8 file (plain or ``.gz``), or of stdin when ``spec`` is ``-``.

    Invalid UTF-8 is an :class:`InputError` naming the file (``<stdin>``) and the line.
    """
    if spec != STDIN:
        yield from iter_lines(spec)
        return
    for lineno, raw in enumerate(sys.stdin.buffer, start=1):
        try:
            yield lineno, raw.rstrip(b"\r\n").decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"<stdin>:{lineno}: invalid UTF-8 ({err.reason})") from err


def split_pair(line: str, where: str) -> tuple[str, str]:
    fields = line.split("\t")
    if len(fields) != 2:
        raise InputError(f"{where}: expected 2 tab-separated fields, found {len(fields)}")
    return fields[0], fields[1]


def score_lines(model, spec: str, out, batch_size: int, threads: int | None) -> int:
    """Score every line of ``spec`` into the text stream ``out``; returns the number of pairs."""
    name = "<stdin>" if spec == STDIN else spec
    n = 0
    for batch in iter_batches(iter_input_lines(spec), batch_size):
        pairs = [split_pair(line, f"{name}:{lineno}") for lineno, line in batch]
        cosines = model.score(
            [a for a, _ in pairs], [b for _, b in pairs], batch_size=batch_size, num_threads=threads
        )
        out.writelines(
            f"{line}\t{cos:.6f}\n" for (_, line), cos in zip(batch, cosines, strict=True)
        )
        n += len(batch)
    return n


def run(args: argparse.Namespace) -> int:
    from psp.model import load

    model = load(args.model)
    with contextlib.ExitStack() as stack:
        if args.output == STDIN:
            out = sys.stdout
        else:
            out = stack.enter_context(atomic_open(args.output, "wt"))
        n = score_lines(model, args.input, out, args.batch_size, args.threads)
    print(f"scored {n} pairs", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "score",
        help="cosine similarity of sentence pairs (sent1<TAB>sent2 per line)",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--model", required=True, help="model directory")
    parser.add_argument(
        "--input", required=True, help="sent1<TAB>sent2 lines (.gz ok, - for stdin)"
    )
    parser.add_argument("--output", required=True, help="input lines + <TAB>cosine (- for stdout)")
    parser.add_argument("--batch-size", type=int, default=8192, help="pairs per batch")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    parser.set_defaults(func=run)
