"""Faiss indexes for shards too large to search exactly in reasonable time.

Below ``IndexConfig.ivf_min_size`` vectors an exact ``IndexFlatIP``; above it an inverted file
from the configured factory string, trained on a random sample and filled block by block from
the memory-mapped shards. Faiss GPU is used when present. Saved indexes use Faiss's own binary
format (``faiss.write_index``), written atomically.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import faiss
import numpy as np

from psp.io import InputError, atomic_path
from psp.mine.config import IndexConfig
from psp.mine.shards import EmbeddingShard, open_embeddings, read_rows

log = logging.getLogger(__name__)


def use_gpu(cfg: IndexConfig) -> bool:
    available = hasattr(faiss, "index_cpu_to_all_gpus") and faiss.get_num_gpus() > 0
    return available if cfg.use_gpu is None else bool(cfg.use_gpu and available)


def _check_dims(shards: Sequence[EmbeddingShard], paths: Sequence) -> int:
    dim = shards[0].shape[1]
    for arr, path in zip(shards, paths, strict=True):
        if arr.shape[1] != dim:
            raise InputError(
                f"embedding dimensions differ: {paths[0]} has dim {dim}, {path} has dim {arr.shape[1]}"
            )
    return dim


def _sample(shards: Sequence[EmbeddingShard], ids: np.ndarray) -> np.ndarray:
    """Gather global row ``ids`` (sorted) across consecutive shards as float32."""
    ends = np.cumsum([len(s) for s in shards])
    out, start = [], 0
    for shard, end in zip(shards, ends, strict=True):
        out.append(shard.take(ids[(ids >= start) & (ids < end)] - start))
        start = end
    return np.ascontiguousarray(np.concatenate(out))


def build_index(
    emb_npy_paths: Sequence[str | os.PathLike],
    out_index: str | os.PathLike | None,
    cfg: IndexConfig,
    block_size: int = 16384,
) -> faiss.Index:
    """Index the rows of ``emb_npy_paths`` (in order; ids are positions in their concatenation).

    Returns the index (on GPU when used) and also writes it to ``out_index`` unless that is None.
    """
    shards = [open_embeddings(p) for p in emb_npy_paths]
    dim = _check_dims(shards, emb_npy_paths)
    n = sum(len(s) for s in shards)
    gpu = use_gpu(cfg)
    ivf = n >= cfg.ivf_min_size
    if ivf:
        nlist = cfg.nlist_for(n)
        factory = cfg.factory.format(nlist=nlist)
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    else:
        factory = "Flat"
        index = faiss.IndexFlatIP(dim)
    log.info("%s index over %d vectors of dim %d (gpu: %s)", factory, n, dim, gpu)
    if gpu:
        index = faiss.index_cpu_to_all_gpus(index)
    if ivf:
        n_train = min(n, cfg.train_size or 64 * nlist)
        sample = np.sort(np.random.default_rng(cfg.seed).choice(n, n_train, replace=False))
        index.train(_sample(shards, sample))
        space = faiss.GpuParameterSpace() if gpu else faiss.ParameterSpace()
        space.set_index_parameter(index, "nprobe", cfg.nprobe)
    for shard in shards:
        for a in range(0, len(shard), block_size):
            index.add(shard.rows(a, a + block_size))
    if out_index is not None:
        with atomic_path(out_index) as tmp:
            faiss.write_index(faiss.index_gpu_to_cpu(index) if gpu else index, str(tmp))
    return index


def search_index(
    index: faiss.Index, queries, k: int, block_size: int = 65536
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of each query row (an array or an ``EmbeddingShard``), searched block by block."""
    dist = np.full((len(queries), k), -np.inf, dtype=np.float32)
    ids = np.full((len(queries), k), -1, dtype=np.int64)
    for a in range(0, len(queries), block_size):
        block = read_rows(queries, a, a + block_size)
        dist[a : a + len(block)], ids[a : a + len(block)] = index.search(block, k)
    dist[ids < 0] = -np.inf
    return dist, ids
