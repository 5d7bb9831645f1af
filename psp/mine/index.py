"""The coarse quantizer of inverted-file search: one per pair, and each row's nearest lists.

A side is indexed in two steps, each a workflow job:

1. :func:`train_index` draws a random sample across *all* shards of both sides of the pair and
   trains a spherical k-means quantizer on it (``nlist`` centroids), written as a Faiss flat
   inner-product index (Faiss's own binary format, no pickle), atomically.
2. :func:`fill_index` assigns every row of one shard to its ``nprobe`` nearest lists (largest
   inner product with the centroid) and writes them; the first is the list the row is stored in.

Every shard of both sides thus shares one quantizer (a sample from one shard would fit that
shard's clusters only, and list numbers would mean different regions in different shards; both
languages live in one embedding space, so one set of lists serves both), and a row's coarse
search is done once, not once per shard pair it takes part in. The search itself
(:mod:`psp.mine.ivf`) reads the embeddings, not codes, so its scores are exact.

Below ``IndexConfig.ivf_min_size`` rows a pair is searched exactly (``psp.mine.knn``): the index
jobs then write empty files, which :func:`load_lists` returns as ``None``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path

import faiss
import numpy as np

from psp.io import InputError, atomic_path
from psp.mine.config import IndexConfig
from psp.mine.shards import EmbeddingShard, open_embeddings

log = logging.getLogger(__name__)

KNN = tuple[np.ndarray, np.ndarray]  # (dist float32 (n, k) descending, ids int64 (n, k); -1 = none)


def uses_ivf(n_src: int, n_tgt: int, cfg: IndexConfig | None) -> bool:
    """Whether a pair of sides with these row counts is searched through inverted lists.

    Exact search costs ``n_src · n_tgt`` products, so the sides' geometric mean is compared with
    ``cfg.ivf_min_size`` (the crossover measured on equal sides): a few thousand sentences
    against a large side stay exact, where training and assigning would cost more than they
    save. One decision for the whole pair, from the shard plans, so every job of the grid agrees.
    """
    return cfg is not None and n_src * n_tgt >= cfg.ivf_min_size**2


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


def _write(index: faiss.Index, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        faiss.write_index(index, str(tmp))


def write_no_index(*paths: str | os.PathLike) -> None:
    """The index files of a pair searched exactly: empty files (see :func:`load_lists`)."""
    for path in paths:
        with atomic_path(path):
            pass


def train_index(
    src_npy_paths: Sequence[str | os.PathLike],
    tgt_npy_paths: Sequence[str | os.PathLike],
    cfg: IndexConfig,
    out_index: str | os.PathLike,
) -> faiss.IndexFlatIP:
    """Train the pair's quantizer on a uniform sample of every shard of both sides.

    The number of lists follows the larger side (:meth:`IndexConfig.nlist_for`); the sample
    size and iterations are ``cfg``'s, so the job's memory is the sample (``train_rows`` rows)
    and its time ``train_iters`` passes of sample × centroids products.
    """
    paths = [*src_npy_paths, *tgt_npy_paths]
    shards = [open_embeddings(p) for p in paths]
    dim = _check_dims(shards, paths)
    n_src = sum(len(s) for s in shards[: len(src_npy_paths)])
    n = sum(len(s) for s in shards)
    nlist = cfg.nlist_for(max(n_src, n - n_src))
    n_train = max(nlist, cfg.train_rows(nlist, n))
    log.info("training %d lists on %d of %d vectors of dim %d", nlist, n_train, n, dim)
    ids = np.sort(np.random.default_rng(cfg.seed).choice(n, min(n, n_train), replace=False))
    sample = _sample(shards, ids)
    centroids = _kmeans(sample, nlist, cfg)
    if cfg.list_split is not None:
        centroids = split_large_lists(sample, centroids, cfg)
        log.info(
            "%d lists after splitting those over %.2f x the mean", len(centroids), cfg.list_split
        )
    quantizer = faiss.IndexFlatIP(dim)
    quantizer.add(centroids)
    _write(quantizer, out_index)
    return quantizer


def _kmeans(x: np.ndarray, nlist: int, cfg: IndexConfig) -> np.ndarray:
    kmeans = faiss.Kmeans(
        x.shape[1],
        nlist,
        niter=cfg.train_iters,
        seed=cfg.seed,
        spherical=True,
        min_points_per_centroid=1,
        max_points_per_centroid=len(x),
    )
    kmeans.train(np.ascontiguousarray(x))
    return kmeans.centroids


def split_large_lists(sample: np.ndarray, centroids: np.ndarray, cfg: IndexConfig) -> np.ndarray:
    """Replace each list holding over ``cfg.list_split`` × the mean share of the sample by a
    k-means of its own rows into lists of about the mean size.

    A kNN job compares, per list, the queries probing it with the rows stored in it, so its work
    is Σ probes × stored over the lists: a large list is both probed often and full, and k-means
    lists of unequal size (a centroid that took several dense regions) made the work four times
    that of equal lists at 1M rows. Split, such a region gets lists of its own, rows stay in
    their nearest list and ``nlist`` grows a little (4,000 to 5,105 at 1M, the kNN's work 3.99
    to 1.40 × equal lists; recall unchanged on the synthetic benchmark at 100k and 300k; on real
    es-en embeddings, whose neighbourhoods are flat, recall@4 of the one-sided search fell 0.70
    to 0.66 for 0.67 × the work).
    """
    assign = faiss.IndexFlatIP(centroids.shape[1])
    assign.add(centroids)
    nearest = assign.search(sample, 1)[1][:, 0]
    counts = np.bincount(nearest, minlength=len(centroids))
    mean = len(sample) / len(centroids)
    parts = []
    for lst, count in enumerate(counts):
        if count > cfg.list_split * mean:
            parts.append(_kmeans(sample[nearest == lst], math.ceil(count / mean), cfg))
        else:
            parts.append(centroids[lst : lst + 1])
    return np.ascontiguousarray(np.concatenate(parts))


def fill_index(
    trained_index: str | os.PathLike,
    emb_npy: str | os.PathLike,
    out_lists: str | os.PathLike,
    *,
    nprobe: int,
    block_size: int = 65536,
) -> np.ndarray:
    """Assign one shard's rows to their ``nprobe`` nearest lists; writes and returns them.

    Computed once per row here, the assignments spare each of the S kNN jobs of the shard's row
    of the grid the coarse search. ``out_lists`` is an ``.npz`` with ``lists`` (int32,
    rows × nprobe, nearest first: the row's own list is its first) and ``nlist``.
    """
    quantizer = faiss.read_index(str(trained_index))
    shard = open_embeddings(emb_npy)
    if shard.shape[1] != quantizer.d:
        raise InputError(
            f"{emb_npy} has dim {shard.shape[1]}, the quantizer {trained_index} {quantizer.d}"
        )
    nprobe = min(nprobe, quantizer.ntotal)
    lists = np.empty((len(shard), nprobe), dtype=np.int32)
    for a in range(0, len(shard), block_size):
        block = shard.rows(a, a + block_size)
        lists[a : a + len(block)] = quantizer.search(block, nprobe)[1]
    with atomic_path(out_lists) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, lists=lists, nlist=np.int64(quantizer.ntotal))
    return lists


def load_lists(path: str | os.PathLike) -> np.ndarray | None:
    """What :func:`fill_index` wrote; ``None`` for the empty file of an exactly searched pair."""
    if Path(path).stat().st_size == 0:
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            lists = z["lists"]
    except (OSError, ValueError, KeyError) as err:
        raise InputError(f"{path}: not a list assignment file: {err}") from err
    if lists.ndim != 2:
        raise InputError(f"{path}: list assignments of shape {lists.shape}, expected 2-D")
    return lists
