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
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import faiss
import numpy as np
import torch
from tqdm import tqdm

from psp.io import InputError, atomic_path
from psp.mine.config import IndexConfig
from psp.mine.shards import open_embeddings, read_rows

log = logging.getLogger(__name__)

KNN = tuple[np.ndarray, np.ndarray]  # (dist float32 (n, k) descending, ids int64 (n, k); -1 = none)


def empty_knn(n: int, k: int) -> KNN:
    return np.full((n, k), -np.inf, dtype=np.float32), np.full((n, k), -1, dtype=np.int64)


def _block(x, start: int, stop: int) -> torch.Tensor:
    return torch.from_numpy(read_rows(x, start, stop))


def _push(dist: torch.Tensor, ids: torch.Tensor, rows: slice, d_new, i_new, k: int) -> None:
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
            _push(fD, fI, slice(a, b), top, pos + c, k)
            top, pos = torch.topk(sim.T, kb, dim=1)
            _push(bD, bI, slice(c, d), top, pos + a, k)
    return (fD.numpy(), fI.numpy()), (bD.numpy(), bI.numpy())


def memory_estimate(ns: int, nt: int, dim: int, k: int, block_size: int) -> float:
    """Bytes of peak working memory of :func:`knn_both_directions` (blocks, products, heaps)."""
    bs, bt = min(block_size, ns), min(block_size, nt)
    blocks = (bs + bt) * dim * 4
    products = 3 * bs * bt * 4  # the product, its transposed top-k scratch and torch's topk buffer
    heaps = (ns + nt) * k * 12 * 3  # running top-k plus the concatenation while merging
    return float(blocks + products + heaps)


def knn_shard_pair(
    src_npy: str | os.PathLike,
    tgt_npy: str | os.PathLike,
    src_offset: int,
    tgt_offset: int,
    k: int,
    out_npz: str | os.PathLike,
    block_size: int = 4096,
    index: IndexConfig | None = None,
) -> Path:
    """Top-k both directions between one source and one target shard, written to ``out_npz``.

    Args:
        src_npy, tgt_npy: L2-normalised embedding shards (``embed_shard`` outputs), read by block.
        src_offset, tgt_offset: global row number of each shard's first row; stored ids are global.
        k: neighbours per row.
        out_npz: written atomically with ``fwd_D, fwd_I`` (src rows), ``bwd_D, bwd_I`` (tgt rows),
            and ``meta`` (JSON: offsets, row counts, k) so the reduce step can check coverage.
        block_size: rows per block; peak memory grows with its square (see :func:`memory_estimate`).
        index: None for exact search; with an :class:`IndexConfig`, a side with at least
            ``index.ivf_min_size`` rows is indexed with an inverted file and searched approximately.
    """
    src, tgt = open_embeddings(src_npy), open_embeddings(tgt_npy)
    if src.shape[1] != tgt.shape[1]:
        raise InputError(
            f"embedding dimensions differ: {src_npy} has dim {src.shape[1]}, "
            f"{tgt_npy} has dim {tgt.shape[1]}"
        )
    ns, nt, dim = len(src), len(tgt), src.shape[1]
    log.info(
        "kNN %s (%d rows) x %s (%d rows), dim %d, k %d: about %.1f MiB working memory",
        src_npy,
        ns,
        tgt_npy,
        nt,
        dim,
        k,
        memory_estimate(ns, nt, dim, k, block_size) / 2**20,
    )
    t0 = time.perf_counter()
    if index is not None and max(ns, nt) >= index.ivf_min_size:
        from psp.mine.index import build_index, search_index

        fwd = search_index(build_index([tgt_npy], None, index), src, k, block_size)
        bwd = search_index(build_index([src_npy], None, index), tgt, k, block_size)
    else:
        fwd, bwd = knn_both_directions(src, tgt, k, block_size)
    log.info("kNN done in %.1f s", time.perf_counter() - t0)
    meta = {
        "src_offset": src_offset,
        "tgt_offset": tgt_offset,
        "src_rows": ns,
        "tgt_rows": nt,
        "k": k,
    }
    with atomic_path(out_npz) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(
                handle,
                fwd_D=fwd[0],
                fwd_I=_shift(fwd[1], tgt_offset),
                bwd_D=bwd[0],
                bwd_I=_shift(bwd[1], src_offset),
                meta=np.array(json.dumps(meta)),
            )
    return Path(out_npz)


def _shift(ids: np.ndarray, offset: int) -> np.ndarray:
    return np.where(ids >= 0, ids + offset, -1).astype(np.int64)


def merge_knn(parts: Sequence[KNN], k: int, keep_max: bool = True) -> KNN:
    """Merge per-shard sorted top-k results for the same query rows into one top-k.

    ``parts`` are ``(dist, ids)`` pairs of shape ``(n, k_i)``; narrower ones are padded. Missing
    neighbours (id -1) never displace real ones.
    """
    if not parts:
        raise ValueError("merge_knn: no parts")
    n = len(parts[0][0])
    pad = -np.inf if keep_max else np.inf
    Dall = np.full((len(parts), n, k), pad, dtype=np.float32)
    Iall = np.full((len(parts), n, k), -1, dtype=np.int64)
    for s, (dist, ids) in enumerate(parts):
        if len(dist) != n or dist.shape != ids.shape:
            raise ValueError(
                f"merge_knn: part {s} has shape {dist.shape}/{ids.shape}, expected {n} rows"
            )
        w = min(k, dist.shape[1])
        Dall[s, :, :w], Iall[s, :, :w] = dist[:, :w], ids[:, :w]
    if n == 0:
        return Dall[0], Iall[0]
    dist, ids = faiss.merge_knn_results(Dall, Iall, keep_max=keep_max)
    dist[ids < 0] = pad  # Faiss fills missing slots with -FLT_MAX; keep the (-inf, -1) convention
    return dist, ids


def read_part(path: str | os.PathLike) -> tuple[dict, KNN, KNN]:
    """Load a :func:`knn_shard_pair` output: ``(meta, fwd, bwd)``."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        return meta, (z["fwd_D"], z["fwd_I"]), (z["bwd_D"], z["bwd_I"])


def reduce_parts(part_paths: Sequence[str | os.PathLike], k: int) -> tuple[KNN, KNN]:
    """Merge a complete grid of shard-pair results into global ``fwd`` and ``bwd`` top-k.

    Every source shard must have been paired with every target shard, and the shards of each
    side must tile ``[0, n)`` without gaps; otherwise the error names what is missing.
    """
    fwd_parts, bwd_parts = defaultdict(list), defaultdict(list)
    for path in part_paths:
        meta, fwd, bwd = read_part(path)
        src = (meta["src_offset"], meta["src_rows"])
        tgt = (meta["tgt_offset"], meta["tgt_rows"])
        fwd_parts[src].append((tgt, fwd))
        bwd_parts[tgt].append((src, bwd))
    return _reduce_side(fwd_parts, bwd_parts, k, "source"), _reduce_side(
        bwd_parts, fwd_parts, k, "target"
    )


def _reduce_side(parts: dict, other_parts: dict, k: int, side: str) -> KNN:
    """Shards are keyed by ``(offset, rows)`` so that empty shards (same offset) stay distinct."""
    expected = sorted(other_parts)
    D_out, I_out, start = [empty_knn(0, k)[0]], [empty_knn(0, k)[1]], 0
    for offset, rows in sorted(parts):
        if offset != start:
            raise InputError(
                f"kNN parts: {side} rows [{start}, {offset}) are not covered by any part"
            )
        got = sorted(o for o, _ in parts[offset, rows])
        if got != expected:
            raise InputError(
                f"kNN parts: {side} shard (offset, rows) = {(offset, rows)} paired with {got}, "
                f"expected {expected}"
            )
        dist, ids = merge_knn(
            [knn for _, knn in sorted(parts[offset, rows], key=lambda p: p[0])], k
        )
        D_out.append(dist)
        I_out.append(ids)
        start = offset + rows
    return np.concatenate(D_out), np.concatenate(I_out)


def save_knn(fwd: KNN, bwd: KNN, out_npz: str | os.PathLike) -> Path:
    """Write the reduced global kNN (the reduce rule's output) atomically."""
    with atomic_path(out_npz) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, fwd_D=fwd[0], fwd_I=fwd[1], bwd_D=bwd[0], bwd_I=bwd[1])
    return Path(out_npz)


def load_knn(path: str | os.PathLike) -> tuple[KNN, KNN]:
    with np.load(path, allow_pickle=False) as z:
        return (z["fwd_D"], z["fwd_I"]), (z["bwd_D"], z["bwd_I"])
