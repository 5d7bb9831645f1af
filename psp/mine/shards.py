"""Embed one shard of a sharded text into a ``.npy``, and read such shards back block by block.

One shard is one workflow job: its gzip member (found through the shard plan) is decompressed as
a stream, embedded ``batch_size`` lines at a time and appended to the ``.npy`` after its header
(the shape comes from the plan), so memory stays bounded whatever the corpus size. The array
appears under its final name only once complete (``psp.io.atomic_path``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
from tqdm import tqdm

from psp.io import InputError, atomic_path, iter_batches
from psp.mine.plan import ShardPlan, read_shard_lines
from psp.model.pooling import half_rows, normalize_rows

log = logging.getLogger(__name__)


def embed_shard(
    model,
    text_path: str | os.PathLike,
    plan: ShardPlan,
    *,
    shard: int,
    out_npy: str | os.PathLike,
    batch_size: int = 8192,
    float16: bool = False,
) -> Path:
    """Embed the lines of ``plan.shards[shard]`` of ``text_path`` into ``out_npy``.

    Args:
        model: anything with ``config.dim`` and ``embed(list[str], batch_size=...) ->
            np.ndarray`` (a ``psp.load`` model); its rows are L2-normalised here so inner
            product is cosine downstream.
        text_path: a sharded text (:func:`psp.mine.plan.write_sharded_text`); only this shard's
            gzip member is read.
        plan: the text's shard plan.
        out_npy: written atomically; shape ``(rows, dim)``, float32 (float16 if asked). An empty
            shard gives a ``(0, dim)`` array.

    Returns the output path.
    """
    entry = plan.shards[shard]
    dim = model.config.dim
    dtype = np.float16 if float16 else np.float32
    log.info(
        "embedding %s lines [%d, %d) -> %s (%.1f MiB)",
        text_path,
        entry.start,
        entry.stop,
        out_npy,
        entry.rows * dim * np.dtype(dtype).itemsize / 2**20,
    )
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False}
    with atomic_path(out_npy) as tmp, open(tmp, "wb") as out:
        np.lib.format.write_array_header_1_0(out, {**header, "shape": (entry.rows, dim)})
        progress = tqdm(total=entry.rows, desc=f"embed shard {shard}", unit="line", disable=None)
        row = 0
        for batch in iter_batches(read_shard_lines(text_path, plan, shard), batch_size):
            emb = _embed_batch(
                model,
                batch,
                batch_size=batch_size,
                dim=dim,
                text_path=text_path,
                first_line=entry.start + row,
            )
            if dtype == np.float16:
                emb = half_rows(emb, np.empty(emb.shape, dtype=np.float16))
            out.write(memoryview(emb).cast("B"))
            row += len(batch)
            progress.update(len(batch))
        progress.close()
    return Path(out_npy)


def _embed_batch(model, batch, *, batch_size, dim, text_path, first_line) -> np.ndarray:
    emb = np.asarray(model.embed(batch, batch_size=batch_size), dtype=np.float32)
    if emb.shape != (len(batch), dim):
        raise ValueError(
            f"{text_path}: model returned shape {emb.shape} for {len(batch)} lines of width {dim}"
        )
    if not np.isfinite(emb).all():
        bad = first_line + 1 + int(np.flatnonzero(~np.isfinite(emb).all(axis=1))[0])
        raise InputError(f"{text_path}:{bad}: non-finite embedding")
    return normalize_rows(emb, out=emb)


_HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


class EmbeddingShard:
    """A ``.npy`` embedding shard read block by block with positioned reads.

    A memory map would do the same job, but every page it touches stays in this process's
    resident set until the kernel needs it back, so a kNN pass over two 800 MB shards would look
    like 1.6 GB of RSS to a batch scheduler. Reading blocks into fresh buffers keeps the resident
    set at the block size; repeated reads are still served by the OS page cache.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        try:
            with open(self.path, "rb") as handle:
                version = np.lib.format.read_magic(handle)
                if version not in _HEADER_READERS:
                    raise ValueError(f"unsupported .npy format version {version}")
                shape, fortran, dtype = _HEADER_READERS[version](handle)
                self.offset = handle.tell()
        except ValueError as err:
            raise InputError(f"{path}: not a .npy embedding file: {err}") from err
        if len(shape) != 2 or fortran or dtype not in (np.float32, np.float16):
            raise InputError(
                f"{path}: expected a 2-D C-order float32/float16 array, got {dtype} {shape}"
            )
        expected = self.offset + shape[0] * shape[1] * dtype.itemsize
        if self.path.stat().st_size < expected:
            raise InputError(f"{path}: truncated (.npy header promises {shape})")
        self.shape, self.dtype = (int(shape[0]), int(shape[1])), dtype

    def __len__(self) -> int:
        return self.shape[0]

    def rows(self, start: int, stop: int, *, keep_float16: bool = False) -> np.ndarray:
        """Rows ``[start, stop)`` as a new float32 array (float16 shards stay float16 with
        ``keep_float16``: half the memory, and converted row by row where they are used)."""
        start, stop = max(0, start), min(stop, self.shape[0])
        count = max(0, stop - start) * self.shape[1]
        offset = self.offset + start * self.shape[1] * self.dtype.itemsize
        block = np.fromfile(self.path, dtype=self.dtype, count=count, offset=offset)
        block = block.reshape(-1, self.shape[1])
        return block if keep_float16 else block.astype(np.float32, copy=False)

    def take(self, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` (any order) as float32, one positioned read each.

        Positioned reads rather than a memory map, for the reason in the class docstring: a
        sample of 1% of a shard's rows touches most of its pages.
        """
        ids = np.asarray(ids, dtype=np.int64)
        row_bytes = self.shape[1] * self.dtype.itemsize
        out = np.empty((len(ids), self.shape[1]), dtype=self.dtype)
        view = memoryview(out).cast("B")
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for i, row in enumerate(ids.tolist()):
                if not 0 <= row < self.shape[0]:
                    raise IndexError(f"{self.path}: row {row} outside [0, {self.shape[0]})")
                chunk = view[i * row_bytes : (i + 1) * row_bytes]
                if os.preadv(fd, [chunk], self.offset + row * row_bytes) != row_bytes:
                    raise InputError(f"{self.path}: short read at row {row}")
        finally:
            os.close(fd)
        return out.astype(np.float32, copy=False)


def read_rows(x, start: int, stop: int, *, keep_float16: bool = False) -> np.ndarray:
    """Rows of an in-memory array or an :class:`EmbeddingShard`, as contiguous float32 (or
    float16 where stored so and ``keep_float16``)."""
    if isinstance(x, EmbeddingShard):
        return x.rows(start, stop, keep_float16=keep_float16)
    return np.array(x[start:stop], dtype=read_dtype(x, keep_float16=keep_float16))


def read_dtype(x, *, keep_float16: bool) -> np.dtype:
    """The dtype :func:`read_rows` returns for ``x``: float16 where stored so and kept, else
    float32."""
    return np.dtype(np.float16 if keep_float16 and x.dtype == np.float16 else np.float32)


def open_embeddings(path: str | os.PathLike) -> EmbeddingShard:
    """Open an embedding shard for block reads, checking it is a 2-D float array."""
    return EmbeddingShard(path)
