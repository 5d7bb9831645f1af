"""Split a text file into line shards and embed one shard into a memory-mappable ``.npy``.

One shard is one workflow job: the file is read as a stream, embedded ``batch_size`` lines at a
time and appended to the ``.npy`` after its header (the shape is known from the line count), so
memory stays bounded whatever the corpus size. The array appears under its final name only once complete (``psp.io.atomic_path``).
"""

from __future__ import annotations

import gzip
import logging
import os
import zlib
from pathlib import Path

import numpy as np
from tqdm import tqdm

from psp.io import InputError, atomic_path, iter_lines, open_binary

log = logging.getLogger(__name__)


def count_lines(path: str | os.PathLike) -> int:
    """Number of lines of a plain or gzipped text file (a last line without newline counts)."""
    n, last = 0, b"\n"
    try:
        with open_binary(path) as handle:
            while chunk := handle.read(1 << 20):
                n += chunk.count(b"\n")
                last = chunk[-1:]
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise InputError(f"{path}: corrupt or truncated compressed file: {err}") from err
    return n + (last != b"\n")


def shard_bounds(n_lines: int, n_shards: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, stop)`` line ranges whose sizes differ by at most one.

    More shards than lines gives empty shards rather than an error, so a workflow with a fixed
    shard count still runs on a tiny corpus.
    """
    if n_lines < 0 or n_shards < 1:
        raise ValueError(
            f"shard_bounds: need n_lines >= 0 and n_shards >= 1, got {n_lines}, {n_shards}"
        )
    edges = [n_lines * s // n_shards for s in range(n_shards + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def model_dim(model) -> int:
    """Embedding width: ``model.config.dim`` where the model has a config, else by probing."""
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "dim", None):
        return int(config.dim)
    return int(np.asarray(model.embed([""])).shape[1])


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """L2-normalise rows in float32; an all-zero row stays zero (cosine 0 with everything)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def embed_shard(
    model,
    text_path: str | os.PathLike,
    shard: int,
    n_shards: int,
    out_npy: str | os.PathLike,
    batch_size: int = 8192,
    float16: bool = False,
) -> Path:
    """Embed lines ``shard_bounds(count_lines(text_path), n_shards)[shard]`` into ``out_npy``.

    Args:
        model: anything with ``embed(list[str], batch_size=...) -> np.ndarray`` (a ``psp.load``
            model); its rows are L2-normalised here so inner product is cosine downstream.
        text_path: UTF-8 text, one sentence per line, plain or ``.gz``.
        shard, n_shards: which contiguous slice of the file this job embeds.
        out_npy: written atomically; shape ``(stop - start, dim)``, float32 (float16 if asked).

    Returns the output path. An empty input file is an :class:`InputError` naming it.
    """
    if not 0 <= shard < n_shards:
        raise ValueError(f"embed_shard: shard {shard} outside [0, {n_shards})")
    n_lines = count_lines(text_path)
    if n_lines == 0:
        raise InputError(f"{text_path}: empty corpus (no lines to embed)")
    start, stop = shard_bounds(n_lines, n_shards)[shard]
    dim = model_dim(model)
    dtype = np.float16 if float16 else np.float32
    log.info(
        "embedding %s lines [%d, %d) -> %s (%.1f MiB)",
        text_path,
        start,
        stop,
        out_npy,
        (stop - start) * dim * np.dtype(dtype).itemsize / 2**20,
    )
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False}
    with atomic_path(out_npy) as tmp, open(tmp, "wb") as out:
        np.lib.format.write_array_header_1_0(out, {**header, "shape": (stop - start, dim)})
        row, batch = 0, []
        progress = tqdm(total=stop - start, desc=f"embed shard {shard}", unit="line", disable=None)
        for lineno, text in iter_lines(text_path):
            if lineno <= start:
                continue
            if lineno > stop:
                break
            batch.append(text)
            if len(batch) == batch_size or lineno == stop:
                emb = _embed_batch(model, batch, batch_size, dim, text_path, start + row)
                out.write(emb.astype(dtype, copy=False).tobytes())
                row += len(batch)
                progress.update(len(batch))
                batch = []
        progress.close()
        if row != stop - start:
            raise InputError(f"{text_path}: expected {stop} lines, the file changed while reading")
    return Path(out_npy)


def _embed_batch(model, batch, batch_size, dim, text_path, first_line) -> np.ndarray:
    emb = np.asarray(model.embed(batch, batch_size=batch_size), dtype=np.float32)
    if emb.shape != (len(batch), dim):
        raise ValueError(
            f"{text_path}: model returned shape {emb.shape} for {len(batch)} lines of width {dim}"
        )
    if not np.isfinite(emb).all():
        bad = first_line + 1 + int(np.flatnonzero(~np.isfinite(emb).all(axis=1))[0])
        raise InputError(f"{text_path}:{bad}: non-finite embedding")
    return normalize_rows(emb)


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

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``[start, stop)`` as a new float32 array."""
        start, stop = max(0, start), min(stop, self.shape[0])
        count = max(0, stop - start) * self.shape[1]
        offset = self.offset + start * self.shape[1] * self.dtype.itemsize
        block = np.fromfile(self.path, dtype=self.dtype, count=count, offset=offset)
        return block.reshape(-1, self.shape[1]).astype(np.float32, copy=False)

    def take(self, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` (any order) as float32, through a temporary memory map."""
        arr = np.load(self.path, mmap_mode="r")
        return np.asarray(arr[np.asarray(ids)], dtype=np.float32)


def read_rows(x, start: int, stop: int) -> np.ndarray:
    """Rows of an in-memory array or an :class:`EmbeddingShard`, as contiguous float32."""
    if isinstance(x, EmbeddingShard):
        return x.rows(start, stop)
    return np.array(x[start:stop], dtype=np.float32)


def open_embeddings(path: str | os.PathLike) -> EmbeddingShard:
    """Open an embedding shard for block reads, checking it is a 2-D float array."""
    return EmbeddingShard(path)
