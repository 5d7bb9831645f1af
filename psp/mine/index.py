"""Faiss inverted-file indexes for sides too large to search exactly, one per shard, built once.

A side is indexed in two steps, each a workflow job:

1. :func:`train_index` draws a random sample across *all* shards of both sides of the pair and
   trains the coarse quantizer and the codec (``factory``, e.g. ``IVF{nlist},SQfp16``) on it,
   then writes the trained, empty index.
2. :func:`fill_index` adds one shard's rows to a copy of that trained index and writes it, with
   each row's nearest lists.

Every shard's index of both sides thus shares one quantizer (a sample from one shard would fit
that shard's clusters only, and list numbers would mean different regions in different shards;
both languages live in one embedding space, so one set of lists serves both), the 2·S
indexes of an S × S shard grid are built once instead of once per shard pair, and a query's
coarse search is done once, not once per shard it is searched in (:func:`search_assigned`). Indexes are written with
``faiss.write_index`` (Faiss's own binary format, no pickle), atomically.

Below ``IndexConfig.ivf_min_size`` rows a side is searched exactly (``psp.mine.knn``): the index
jobs then write empty files, which :func:`indexed_shard` returns as ``None``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np
from faiss.contrib.ivf_tools import add_preassigned, search_preassigned

from psp.io import InputError, atomic_path
from psp.mine.config import IndexConfig
from psp.mine.shards import EmbeddingShard, open_embeddings, read_rows

log = logging.getLogger(__name__)

KNN = tuple[np.ndarray, np.ndarray]  # (dist float32 (n, k) descending, ids int64 (n, k); -1 = none)


def uses_ivf(n_src: int, n_tgt: int, cfg: IndexConfig | None) -> bool:
    """Whether a pair of sides with these row counts is searched through IVF indexes.

    One decision for the whole pair, from the shard plans, so every job of the grid agrees.
    """
    return cfg is not None and max(n_src, n_tgt) >= cfg.ivf_min_size


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


def _trained(
    shards: Sequence[EmbeddingShard], dim: int, cfg: IndexConfig, nlist: int
) -> faiss.Index:
    """``cfg.factory`` with ``nlist`` lists, trained on a uniform sample of the ``shards``."""
    n = sum(len(s) for s in shards)
    factory = cfg.factory.format(nlist=nlist)
    index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    n_train = min(n, cfg.train_size or 64 * nlist)
    log.info("training %s on %d of %d vectors of dim %d", factory, n_train, n, dim)
    sample = np.sort(np.random.default_rng(cfg.seed).choice(n, n_train, replace=False))
    index.train(_sample(shards, sample))
    return index


def _write(index: faiss.Index, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        faiss.write_index(index, str(tmp))


def write_no_index(*paths: str | os.PathLike) -> None:
    """The index files of a pair searched exactly: empty files (see :func:`indexed_shard`)."""
    for path in paths:
        with atomic_path(path):
            pass


def train_index(
    src_npy_paths: Sequence[str | os.PathLike],
    tgt_npy_paths: Sequence[str | os.PathLike],
    cfg: IndexConfig,
    out_index: str | os.PathLike,
) -> faiss.Index:
    """Train an empty index on every shard of both sides of the pair.

    The training sample (``cfg.train_size`` rows, default 64 per list) is drawn uniformly from
    the concatenation of all shards, so it is spread over both whole sides; the number of lists
    follows the larger side (:meth:`IndexConfig.nlist_for`).
    """
    paths = [*src_npy_paths, *tgt_npy_paths]
    shards = [open_embeddings(p) for p in paths]
    n_side = max(
        sum(len(s) for s in shards[: len(src_npy_paths)]),
        sum(len(s) for s in shards[len(src_npy_paths) :]),
    )
    index = _trained(shards, _check_dims(shards, paths), cfg, cfg.nlist_for(n_side))
    _write(index, out_index)
    return index


def _ivf(index: faiss.Index) -> faiss.IndexIVF:
    return faiss.extract_index_ivf(index)


def fill_index(
    trained_index: str | os.PathLike,
    emb_npy: str | os.PathLike,
    out_index: str | os.PathLike,
    out_lists: str | os.PathLike,
    nprobe: int,
    block_size: int = 65536,
) -> faiss.Index:
    """Add one shard's rows to the trained index; also record each row's ``nprobe`` nearest lists.

    The coarse quantizer is shared by every shard of both sides, so a row's nearest lists are
    the same whichever shard's index it is searched in: computed here once, they spare
    each of the S kNN jobs of the shard's row of the grid the coarse search (which, with S in
    the tens, would cost more than the search itself). The row's own list is the first of them.
    ``out_lists`` is an ``.npz`` with ``lists`` (int64, rows × nprobe) and ``coarse`` (float32).
    """
    index = faiss.read_index(str(trained_index))
    ivf = _ivf(index)
    shard = open_embeddings(emb_npy)
    if shard.shape[1] != index.d:
        raise InputError(f"{emb_npy} has dim {shard.shape[1]}, the index {trained_index} {index.d}")
    nprobe = min(nprobe, ivf.nlist)
    lists = np.empty((len(shard), nprobe), dtype=np.int64)
    coarse = np.empty((len(shard), nprobe), dtype=np.float32)
    for a in range(0, len(shard), block_size):
        block = shard.rows(a, a + block_size)
        coarse[a : a + len(block)], lists[a : a + len(block)] = ivf.quantizer.search(block, nprobe)
        add_preassigned(ivf, block, np.ascontiguousarray(lists[a : a + len(block), 0]))
    _write(index, out_index)
    with atomic_path(out_lists) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, lists=lists, coarse=coarse)
    return index


@dataclass
class IndexedShard:
    """A shard's filled index with its rows' own nearest lists (both from :func:`fill_index`)."""

    index: faiss.Index
    lists: np.ndarray  # int64 (rows, nprobe)
    coarse: np.ndarray  # float32 (rows, nprobe): inner products with those lists' centroids


def indexed_shard(
    index_path: str | os.PathLike, lists_path: str | os.PathLike
) -> IndexedShard | None:
    """Load what :func:`fill_index` wrote; ``None`` for the empty files of an exactly searched pair."""
    if Path(index_path).stat().st_size == 0:
        return None
    with np.load(lists_path, allow_pickle=False) as z:
        return IndexedShard(faiss.read_index(str(index_path)), z["lists"], z["coarse"])


def search_assigned(
    index: faiss.Index,
    queries,
    lists: np.ndarray,
    coarse: np.ndarray,
    k: int,
    block_size: int = 16384,
) -> KNN:
    """Top-k of each query row in ``index``, probing the lists already assigned to each query.

    ``lists``/``coarse`` come from :func:`fill_index` of the queries' own shard; the number of
    lists probed is their width. Missing neighbours come back as ``(-inf, -1)``.
    """
    ivf = _ivf(index)
    ivf.nprobe = lists.shape[1]
    # search_preassigned runs on one thread in Faiss's default mode 0 (there, search() splits
    # the queries over threads before calling it); mode 3 splits them inside it. Same results.
    ivf.parallel_mode = 3
    return _search_blocks(
        index,
        queries,
        k,
        block_size,
        lambda block, a, b: search_preassigned(ivf, block, k, lists[a:b], coarse[a:b]),
    )


def _search_blocks(index: faiss.Index, queries, k: int, block_size: int, search) -> KNN:
    """``search(block, start, stop)`` over blocks of query rows, into ``(-inf, -1)``-padded top-k."""
    dist = np.full((len(queries), k), -np.inf, dtype=np.float32)
    ids = np.full((len(queries), k), -1, dtype=np.int64)
    if index.ntotal == 0:
        return dist, ids
    for a in range(0, len(queries), block_size):
        block = read_rows(queries, a, a + block_size)
        b = a + len(block)
        dist[a:b], ids[a:b] = search(block, a, b)
    dist[ids < 0] = -np.inf
    return dist, ids


def build_index(
    emb_npy_paths: Sequence[str | os.PathLike],
    out_index: str | os.PathLike | None,
    cfg: IndexConfig,
    block_size: int = 65536,
) -> faiss.Index:
    """One in-memory index over all of ``emb_npy_paths`` (ids: positions in their concatenation).

    An exact ``IndexFlatIP`` below ``cfg.ivf_min_size`` vectors, else the trained ``cfg.factory``.
    For one-off searches and benchmarks; the mining jobs use :func:`train_index` and
    :func:`fill_index` so that each shard is indexed once.
    """
    shards = [open_embeddings(p) for p in emb_npy_paths]
    dim = _check_dims(shards, emb_npy_paths)
    n = sum(len(s) for s in shards)
    if n >= cfg.ivf_min_size:
        index = _trained(shards, dim, cfg, cfg.nlist_for(n))
        faiss.ParameterSpace().set_index_parameter(index, "nprobe", cfg.nprobe)
    else:
        index = faiss.IndexFlatIP(dim)
    for shard in shards:
        for a in range(0, len(shard), block_size):
            index.add(shard.rows(a, a + block_size))
    if out_index is not None:
        _write(index, out_index)
    return index


def search_index(index: faiss.Index, queries, k: int, block_size: int = 65536) -> KNN:
    """Top-k of each query row (an array or an ``EmbeddingShard``), searched block by block.

    Missing neighbours (an index with fewer than ``k`` vectors, or lists probed that hold fewer)
    come back as ``(-inf, -1)``.
    """
    return _search_blocks(index, queries, k, block_size, lambda block, a, b: index.search(block, k))
