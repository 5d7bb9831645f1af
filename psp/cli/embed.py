"""``psp embed``: one embedding row per input line, written as a real ``.npy`` file.

The output ``.npy`` header is sized up front, the rows are appended batch by batch and the file
is renamed into place at the end, so memory stays at one batch whatever the input size, and a
crash leaves no truncated array behind. Sizing up front needs the line count, so ``-`` (stdin) is first spooled to
a temporary file next to the output.

Example:
    psp embed --model results/models/es-en --input sents.txt --output embs.npy --threads 8
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from psp.io import InputError, atomic_path, iter_lines, iter_raw_lines

STDIN = "-"


def iter_batches(lines: Iterator[tuple[int, str]], size: int) -> Iterator[list[tuple[int, str]]]:
    """Group ``(line_number, text)`` items into lists of ``size`` (the last may be shorter)."""
    batch: list[tuple[int, str]] = []
    for item in lines:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def count_lines(path: str | Path) -> int:
    return sum(1 for _ in iter_raw_lines(path))


def embed_file(
    model,
    input_path: str | Path,
    output: str | Path,
    batch_size: int,
    threads: int | None,
    float16: bool,
) -> int:
    """Embed every line of ``input_path`` into ``output`` (``.npy``); returns the row count."""
    n = count_lines(input_path)
    dtype = np.dtype(np.float16 if float16 else np.float32)
    # One reused float32 buffer, appended to the file batch by batch: fresh output memory (a
    # memory map, or a new array per batch) costs a page fault per 4 KiB on first touch, a
    # sizeable share of the time at 1024 dims.
    buffer = np.empty((min(batch_size, max(n, 1)), model.dim), dtype=np.float32)
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False}
    with atomic_path(output) as tmp, open(tmp, "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, {**header, "shape": (n, model.dim)})
        with tqdm(total=n, unit="sent", desc="embed", disable=None) as bar:
            for batch in iter_batches(iter_lines(input_path), batch_size):
                texts = [text for _, text in batch]
                rows = buffer[: len(texts)]
                model.embed(
                    texts, batch_size=batch_size, num_threads=threads, show_progress=False, out=rows
                )
                rows.astype(dtype, copy=False).tofile(handle)
                bar.update(len(texts))
    return n


def run(args: argparse.Namespace) -> int:
    from psp.model import load

    model = load(args.model)
    output = Path(args.output)
    if args.input != STDIN:
        n = embed_file(model, args.input, output, args.batch_size, args.threads, args.float16)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            dir=output.parent, prefix=".stdin.", suffix=".txt"
        ) as spool:
            shutil.copyfileobj(sys.stdin.buffer, spool)
            spool.flush()
            try:
                n = embed_file(
                    model, spool.name, output, args.batch_size, args.threads, args.float16
                )
            except InputError as err:
                raise InputError(str(err).replace(spool.name, "<stdin>")) from err
    print(f"wrote {n} x {model.dim} embeddings to {output}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "embed",
        help="embed one sentence per line into a .npy matrix",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--model", required=True, help="model directory")
    parser.add_argument(
        "--input", required=True, help="UTF-8 text, one sentence per line (.gz ok, - for stdin)"
    )
    parser.add_argument("--output", required=True, help="output .npy (float32, one row per line)")
    parser.add_argument("--batch-size", type=int, default=8192, help="sentences per batch")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    parser.add_argument("--float16", action="store_true", help="store float16 rows (half the size)")
    parser.set_defaults(func=run)
