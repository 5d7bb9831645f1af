"""``psp embed``: one embedding row per input line, written as a real ``.npy`` file.

Rows stream into the output: a ``.npy`` header with room for any row count goes first, the rows
follow batch by batch, and the header gets the final count when the input ends. The input
(stdin too) is read once, memory stays at a few batches whatever its size, and tokenising
overlaps pooling and writing (see :mod:`psp.cli.streaming`). The file is written next to the
output and renamed into place at the end, so a crash leaves no truncated array behind.

The command never imports torch (about 2 s of CPU, as long as embedding 100,000 sentences):
it reads the model with :func:`psp.model.pooling.load_table_model` and pools with
:func:`psp.model.pooling.mean_pool`, the code ``psp.load(model).embed`` pools with too.

Example:
    psp embed --model results/models/es-en --input sents.txt --output embs.npy --threads 8
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Iterable
from pathlib import Path

from psp.cli.options import add_model_stream_arguments
from psp.cli.streaming import iter_input_batches, overlapped
from psp.io import atomic_path

NAME = "embed"
HELP = "embed one sentence per line into a .npy matrix"

# Length of the .npy header written here: room for any row count, and a multiple of 64, the
# alignment numpy gives its own headers.
HEADER_BYTES = 128


def npy_header(descr: str, shape: tuple[int, int]) -> bytes:
    """A ``.npy`` format 1.0 header of exactly :data:`HEADER_BYTES` bytes, so the one written
    before the row count is known can be overwritten in place by the final one."""
    text = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode("latin1")
    body = text.ljust(HEADER_BYTES - 11) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body


def embed_lines(
    model,
    batches: Iterable[tuple[int, list[str]]],
    output: str | Path,
    *,
    batch_size: int,
    threads: int,
    float16: bool,
) -> int:
    """Embed ``(first_line_number, lines)`` batches of at most ``batch_size`` lines into
    ``output`` (``.npy``); returns the row count."""
    import numpy as np

    from psp.model.pooling import half_rows
    from psp.model.progress import progress

    dtype = np.dtype(np.float16 if float16 else np.float32)
    descr = np.lib.format.dtype_to_descr(dtype)
    # Reused buffers: fresh output memory costs a page fault per 4 KiB on first touch, a
    # sizeable share of the time at 1024 dims.
    pooled = np.empty((batch_size, model.dim), dtype=np.float32)
    written = pooled if dtype == pooled.dtype else np.empty(pooled.shape, dtype=dtype)
    rows = 0

    def encode(batch: tuple[int, list[str]]):
        return model.encoder.encode(batch[1], num_threads=threads)

    with (
        atomic_path(output) as tmp,
        open(tmp, "wb") as handle,
        progress(unit="sent", desc="embed") as bar,
    ):

        def pool_and_write(encoded) -> None:
            nonlocal rows
            ids, offsets = encoded
            n = len(offsets) - 1
            model.pool(ids, offsets, pooled[:n], threads)
            if written is not pooled:
                half_rows(pooled[:n], written[:n])
            written[:n].tofile(handle)
            rows += n
            bar.update(n)

        handle.write(npy_header(descr, (0, model.dim)))
        overlapped(map(encode, batches), pool_and_write)
        handle.seek(0)
        handle.write(npy_header(descr, (rows, model.dim)))
    return rows


def run(args: argparse.Namespace) -> int:
    from psp.model.pooling import default_threads, load_table_model

    model = load_table_model(args.model)
    threads = args.threads or default_threads()
    output = Path(args.output)
    batches = iter_input_batches(args.input, args.batch_size)
    n = embed_lines(
        model, batches, output, batch_size=args.batch_size, threads=threads, float16=args.float16
    )
    print(f"wrote {n} x {model.dim} embeddings to {output}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(NAME, help=HELP, description=__doc__.splitlines()[0])
    add_model_stream_arguments(
        parser,
        input_help="UTF-8 text, one sentence per line (.gz ok, - for stdin)",
        output_help="output .npy (float32, one row per line)",
        batch_help="sentences per batch",
    )
    parser.add_argument("--float16", action="store_true", help="store float16 rows (half the size)")
    parser.set_defaults(func=run)
