"""The reduce step of mining: a complete grid of shard-pair kNN parts → global top-k lists.

Kept apart from :mod:`psp.mine.knn`, whose exact search needs torch: the job that merges and
scores (``score_mined``) runs on numpy and Faiss alone and does not pay torch's start-up.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import faiss
import numpy as np

from psp.io import InputError
from psp.mine.index import KNN
from psp.mine.plan import ShardPlan


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


def read_meta(path: str | os.PathLike) -> dict:
    """The ``meta`` record of a :func:`knn_shard_pair` output, without loading its arrays."""
    with np.load(path, allow_pickle=False) as z:
        return json.loads(str(z["meta"]))


def read_direction(path: str | os.PathLike, direction: str) -> KNN:
    """``(dist, ids)`` of one direction (``fwd`` or ``bwd``) of a :func:`knn_shard_pair` output."""
    with np.load(path, allow_pickle=False) as z:
        return z[f"{direction}_D"], z[f"{direction}_I"]


def reduce_parts(
    part_paths: Sequence[str | os.PathLike], k: int, src_plan: ShardPlan, tgt_plan: ShardPlan
) -> tuple[KNN, KNN]:
    """Merge a complete grid of shard-pair results into global ``fwd`` and ``bwd`` top-k.

    Every source shard of ``src_plan`` must have been paired with every target shard of
    ``tgt_plan``, each part with the rows its plan promises; otherwise the error names what is
    missing. Parts are matched by shard number, so empty shards (a text with fewer lines than
    shards) are no special case. One row (or column) of the grid is in memory at a time, so the
    reduce holds the merged result and 1/S of the parts, not all S² of them.
    """
    grid: dict[tuple[int, int], str | os.PathLike] = {}
    for path in part_paths:
        meta = read_meta(path)
        key = (meta["src_shard"], meta["tgt_shard"])
        if key in grid:
            raise InputError(f"{path}: a second kNN part for shard pair {key}")
        src_rows = src_plan.shards[key[0]].rows if key[0] < len(src_plan) else None
        tgt_rows = tgt_plan.shards[key[1]].rows if key[1] < len(tgt_plan) else None
        if (meta["src_rows"], meta["tgt_rows"]) != (src_rows, tgt_rows):
            raise InputError(
                f"{path}: shard pair {key} has {meta['src_rows']} x {meta['tgt_rows']} rows, "
                f"the shard plans say {src_rows} x {tgt_rows}"
            )
        grid[key] = path
    ns, nt = len(src_plan), len(tgt_plan)
    missing = [(s, t) for s in range(ns) for t in range(nt) if (s, t) not in grid]
    if missing:
        raise InputError(
            f"kNN parts: shard pairs {missing[:10]} are missing ({len(missing)} in all)"
        )
    fwd = _concat(
        merge_knn([read_direction(grid[s, t], "fwd") for t in range(nt)], k) for s in range(ns)
    )
    bwd = _concat(
        merge_knn([read_direction(grid[s, t], "bwd") for s in range(ns)], k) for t in range(nt)
    )
    return fwd, bwd


def _concat(parts) -> KNN:
    dist, ids = zip(*parts, strict=True)
    return np.concatenate(dist), np.concatenate(ids)
