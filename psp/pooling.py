"""Sentence vectors from a piece table, in numpy and scipy: mean pooling, unit rows, cosines.

:func:`mean_pool` is the one inference pooling: ``psp.load(dir).embed`` (through
:meth:`psp.model.PSPModel.pool`), ``psp embed`` and ``psp score`` (through :class:`TableModel`)
all call it, so the library and the command line give the same bits from the same code.
:func:`normalize_rows` and :func:`row_cosines` are the one row normaliser and the one paired
cosine of the package (inference, the miner's shards, the evaluators). No torch here: importing
it costs about 2 s of CPU, as long as embedding 100,000 news sentences takes.

Pooling is a sparse matrix (one row per sentence, a 1 per piece) times the table, then a division
by the piece count: scipy adds each sentence's rows in order in float32 and divides. Training
pools with :func:`psp.train.ops.pool` instead (torch, a hand-written backward); its forward,
``F.embedding_bag(mode="mean")``, adds and divides the same way and gives the same bits on the
CPU (``tests/test_train_ops.py``), except that training keeps the ``<unk>`` row of a sentence
with no known piece where :func:`mean_pool` writes zeros (:func:`zero_textless`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from psp.model_dir import ModelConfig, read_model_dir
from psp.spm import PieceEncoder

__all__ = [
    "POOL_BLOCK_BYTES",
    "TableModel",
    "load_table_model",
    "mean_pool",
    "normalize_rows",
    "row_cosines",
    "zero_textless",
]

# Pooling works in blocks of at most this much output, so each temporary stays below glibc's
# 32 MiB mmap ceiling and its memory is recycled from the heap; one 8192 x 1024 float32 block
# (32 MiB) would be mapped and page-faulted afresh every batch (measured on 113k news
# sentences: 116k minor page faults with one block per batch, 24k with blocks).
POOL_BLOCK_BYTES = 16 << 20

#: Thread pools by size, kept across calls (starting threads per batch costs more than pooling).
_POOLS: dict[int, ThreadPoolExecutor] = {}


def mean_pool(
    table: np.ndarray,
    ids: np.ndarray,
    offsets: np.ndarray,
    *,
    out: np.ndarray,
    textless_ids: Sequence[int],
    threads: int = 1,
) -> np.ndarray:
    """Mean of ``table``'s rows for each encoded sentence, written into ``out`` and returned.

    Args:
        table: float32 ``(vocab_size, dim)`` piece embeddings.
        ids, offsets: :meth:`PieceEncoder.encode`'s layout: sentence ``i`` is
            ``ids[offsets[i]:offsets[i + 1]]``.
        out: ``(n, dim)`` float array, ``n = len(offsets) - 1``.
        textless_ids: the pieces that carry no text (:attr:`PieceEncoder.textless_ids`); a
            sentence of nothing else pools to the zero vector (:func:`zero_textless`).
        threads: blocks of at most :data:`POOL_BLOCK_BYTES` of output, at least one per thread,
            run on this many threads (scipy's sparse product releases the GIL).
    """
    n = len(offsets) - 1
    rows = max(1, min(POOL_BLOCK_BYTES // (4 * table.shape[1]), -(-n // threads)))
    starts = range(0, n, rows)

    def block(start: int) -> None:
        _pool_block(table, ids, offsets, block=out[start : min(start + rows, n)], start=start)

    if threads > 1 and len(starts) > 1:
        if threads not in _POOLS:
            _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="pool")
        list(_POOLS[threads].map(block, starts))
    else:
        for start in starts:
            block(start)
    zero_textless(textless_ids, ids, offsets, out)
    return out


def _pool_block(table, ids, offsets, *, block: np.ndarray, start: int) -> None:
    """Sentences ``start:start + len(block)``: one sparse product (a 1 per piece) sums each
    sentence's rows into a fresh zeroed array (scipy cannot write into ``block``), copied over
    and divided by the piece counts."""
    from scipy.sparse import csr_matrix

    stop = start + len(block)
    first, last = int(offsets[start]), int(offsets[stop])
    counts = csr_matrix(
        (
            np.ones(last - first, dtype=np.float32),
            ids[first:last],
            offsets[start : stop + 1] - first,
        ),
        shape=(stop - start, len(table)),
    )
    block[:] = counts @ table
    lengths = np.diff(offsets[start : stop + 1]).astype(np.float32)
    np.divide(block, np.maximum(lengths, 1)[:, None], out=block)


def zero_textless(
    textless_ids: Sequence[int], ids: np.ndarray, offsets: np.ndarray, out: np.ndarray
) -> None:
    """Set to zero the row of every sentence with no known piece (empty, or nothing but
    characters the vocabulary lacks).

    It has no meaning to embed, and the shared ``<unk>`` (or bare word-boundary) row would make
    any two such sentences a perfect match (cosine 1). A zero row has cosine 0 with everything
    (:func:`normalize_rows` keeps it zero), so it never scores as a match.
    """
    n = len(offsets) - 1
    known = np.concatenate(([0], np.cumsum(~np.isin(ids, textless_ids))))
    out[:n][known[offsets[1:]] == known[offsets[:-1]]] = 0


class TableModel:
    """A model for inference only: tokenizer, float32 table and :func:`mean_pool`, no torch."""

    def __init__(self, config: ModelConfig, encoder: PieceEncoder, table: np.ndarray):
        self.config = config
        self.encoder = encoder
        self.table = table

    @property
    def dim(self) -> int:
        return self.config.dim

    def pool(
        self, ids: np.ndarray, offsets: np.ndarray, out: np.ndarray, threads: int = 1
    ) -> np.ndarray:
        """:func:`mean_pool` of encoded sentences (:meth:`PieceEncoder.encode`'s layout)."""
        textless = self.encoder.textless_ids
        return mean_pool(self.table, ids, offsets, out=out, textless_ids=textless, threads=threads)


def load_table_model(path: str | os.PathLike) -> TableModel:
    """:class:`TableModel` of a model directory (checked as :func:`read_model_dir` does)."""
    return TableModel(*read_model_dir(path))


def normalize_rows(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Rows of ``x`` scaled to unit L2 norm (into ``out``, which may be ``x``; else a new
    array); an all-zero row stays zero, so it has cosine 0 with everything."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    return np.divide(x, norms, out=out)


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of ``a[i]`` and ``b[i]`` for every row (``a`` and ``b`` are left as they are); a
    zero row scores 0."""
    return np.einsum("ij,ij->i", normalize_rows(a), normalize_rows(b))
