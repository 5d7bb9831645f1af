"""k nearest neighbours by inner product, in both directions, between two embedding shards.

The exact path follows ``faiss.contrib.exhaustive_search``: loop over blocks of rows, keep a
running top-k per row. One matrix product per (source block, target block) serves both
directions: its row-wise top-k updates the source rows (fwd) and its column-wise top-k the
target rows (bwd). Shards are read block by block from disk, so peak memory is a few blocks,
not the shards.

Per-pair results are reduced over shards like ``faiss.merge_knn_results``: every source row is
merged over all target shards and vice versa.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from psp.io import InputError, atomic_path
from psp.mine.index import KNN, Lists
from psp.mine.ivf import ivf_knn_both_directions
from psp.mine.plan import Shard, ShardPlan
from psp.mine.shards import open_embeddings, read_rows

log = logging.getLogger(__name__)


def empty_knn(n: int, k: int) -> KNN:
    return np.full((n, k), -np.inf, dtype=np.float32), np.full((n, k), -1, dtype=np.int64)


def _block(x, start: int, stop: int) -> torch.Tensor:
    return torch.from_numpy(read_rows(x, start, stop))


def _push(dist: torch.Tensor, ids: torch.Tensor, rows: slice, *, d_new, i_new, k: int) -> None:
    """Merge new candidates into the running top-k of ``rows`` (both sorted descending)."""
    d = torch.cat([dist[rows], d_new], dim=1)
    i = torch.cat([ids[rows], i_new], dim=1)
    top, pos = torch.topk(d, k, dim=1)
    dist[rows], ids[rows] = top, torch.gather(i, 1, pos)


def knn_both_directions(src, tgt, k: int, block_size: int = 4096) -> tuple[KNN, KNN]:
    """Exact top-k inner product src→tgt and tgt→src, ids local to each array.

    ``src`` and ``tgt`` are float arrays or :class:`~psp.mine.shards.EmbeddingShard` files.

    Rows with fewer than ``k`` possible neighbours are padded with ``(-inf, -1)``.
    """
    ns, nt = len(src), len(tgt)
    fD, fI = (torch.from_numpy(a) for a in empty_knn(ns, k))
    bD, bI = (torch.from_numpy(a) for a in empty_knn(nt, k))
    for a in tqdm(range(0, ns, block_size), desc="kNN source blocks", unit="block", disable=None):
        b = min(a + block_size, ns)
        xs = _block(src, a, b)
        for c in range(0, nt, block_size):
            d = min(c + block_size, nt)
            sim = xs @ _block(tgt, c, d).T
            kf, kb = min(k, d - c), min(k, b - a)
            top, pos = torch.topk(sim, kf, dim=1)
            _push(fD, fI, slice(a, b), d_new=top, i_new=pos + c, k=k)
            top, pos = torch.topk(sim.T, kb, dim=1)
            _push(bD, bI, slice(c, d), d_new=top, i_new=pos + a, k=k)
    return (fD.numpy(), fI.numpy()), (bD.numpy(), bI.numpy())


def memory_estimate(ns: int, nt: int, *, dim: int, k: int, block_size: int) -> float:
    """Bytes of peak working memory of :func:`knn_both_directions` (blocks, products, heaps)."""
    bs, bt = min(block_size, ns), min(block_size, nt)
    blocks = (bs + bt) * dim * 4
    products = 3 * bs * bt * 4  # the product, its transposed top-k scratch and torch's topk buffer
    heaps = (ns + nt) * k * 12 * 3  # running top-k plus the concatenation while merging
    return float(blocks + products + heaps)


def knn_shard_pair(
    *,
    src_npy: str | os.PathLike,
    tgt_npy: str | os.PathLike,
    src_plan: ShardPlan,
    tgt_plan: ShardPlan,
    src_shard: int,
    tgt_shard: int,
    k: int,
    out_npz: str | os.PathLike,
    block_size: int = 4096,
    src_lists: Lists | None = None,
    tgt_lists: Lists | None = None,
) -> Path:
    """Top-k both directions between one source and one target shard, written to ``out_npz``.

    Args:
        src_npy, tgt_npy: L2-normalised embedding shards (``embed_shard`` outputs), read by block.
        src_plan, tgt_plan: the sides' shard plans; they give each shard's global offset (stored
            ids are global) and the row count the shard must have.
        src_shard, tgt_shard: which shard of each side this is.
        k: neighbours per row.
        out_npz: written atomically with ``fwd_D, fwd_I`` (src rows), ``bwd_D, bwd_I`` (tgt rows),
            and ``meta`` (JSON: shard numbers, offsets, row counts, k) for the reduce step.
        block_size: rows per block of the exact search; its peak memory grows with the square
            (see :func:`memory_estimate`).
        src_lists, tgt_lists: the two shards' rows' nearest lists (``psp.mine.index.fill_index``,
            one quantizer for the pair) and which pairs to score (their ``compare``, the same for
            both): list-major search (:mod:`psp.mine.ivf`). ``None`` for both: exact search, one
            matrix product per block pair serving both directions.
    """
    src, tgt = open_embeddings(src_npy), open_embeddings(tgt_npy)
    entries = _check_pair(src_npy, tgt_npy, src_plan.shards[src_shard], tgt_plan.shards[tgt_shard])
    if (src_lists is None) != (tgt_lists is None):
        raise ValueError("knn_shard_pair: give both list assignments or neither")
    t0 = time.perf_counter()
    if src_lists is not None:
        log.info("list-major kNN %s (%d rows) x %s (%d rows)", src_npy, len(src), tgt_npy, len(tgt))
        fwd, bwd = ivf_knn_both_directions(
            src,
            tgt,
            src_lists=_rows_of(src_lists, src),
            tgt_lists=_rows_of(tgt_lists, tgt),
            k=k,
            common_lists=_compare_of(src_lists, tgt_lists, src, tgt) == "common_list",
        )
    else:
        log.info(
            "exact kNN %s (%d rows) x %s (%d rows), dim %d, k %d: about %.1f MiB working memory",
            *(src_npy, len(src), tgt_npy, len(tgt), src.shape[1], k),
            memory_estimate(len(src), len(tgt), dim=src.shape[1], k=k, block_size=block_size)
            / 2**20,
        )
        fwd, bwd = knn_both_directions(src, tgt, k, block_size)
    log.info("kNN done in %.1f s", time.perf_counter() - t0)
    _write_part(out_npz, fwd, bwd, entries=entries, shards=(src_shard, tgt_shard), k=k)
    return Path(out_npz)


def _check_pair(src_npy, tgt_npy, src_entry: Shard, tgt_entry: Shard) -> tuple[Shard, Shard]:
    """Both shards exist with the same width and the row counts their plans promise."""
    src, tgt = open_embeddings(src_npy), open_embeddings(tgt_npy)
    if src.shape[1] != tgt.shape[1]:
        raise InputError(
            f"embedding dimensions differ: {src_npy} has dim {src.shape[1]}, "
            f"{tgt_npy} has dim {tgt.shape[1]}"
        )
    for path, arr, entry in ((src_npy, src, src_entry), (tgt_npy, tgt, tgt_entry)):
        if len(arr) != entry.rows:
            raise InputError(f"{path}: {len(arr)} rows, its shard plan says {entry.rows}")
    return src_entry, tgt_entry


def _rows_of(lists: Lists, shard) -> np.ndarray:
    if len(lists.lists) != len(shard):
        raise InputError(
            f"{shard.path}: {len(shard)} rows, its list assignments {len(lists.lists)} (stale index files)"
        )
    return lists.lists


def _compare_of(src_lists: Lists, tgt_lists: Lists, src, tgt) -> str:
    if src_lists.compare != tgt_lists.compare:
        raise InputError(
            f"{src.path} and {tgt.path}: list assignments of different quantizers "
            f"(compare {src_lists.compare} against {tgt_lists.compare}; stale index files)"
        )
    return src_lists.compare


def _write_part(out_npz, fwd: KNN, bwd: KNN, *, entries: tuple, shards: tuple, k: int) -> None:
    src_entry, tgt_entry = entries
    meta = {
        "src_shard": shards[0],
        "tgt_shard": shards[1],
        "src_offset": src_entry.start,
        "tgt_offset": tgt_entry.start,
        "src_rows": src_entry.rows,
        "tgt_rows": tgt_entry.rows,
        "k": k,
    }
    with atomic_path(out_npz) as tmp, open(tmp, "wb") as handle:
        np.savez(
            handle,
            fwd_D=fwd[0],
            fwd_I=_shift(fwd[1], tgt_entry.start),
            bwd_D=bwd[0],
            bwd_I=_shift(bwd[1], src_entry.start),
            meta=np.array(json.dumps(meta)),
        )


def _shift(ids: np.ndarray, offset: int) -> np.ndarray:
    return np.where(ids >= 0, ids + offset, -1).astype(np.int64)
