"""The coarse quantizer of inverted-file search: one per pair, and each row's nearest lists.

A side is indexed in two steps, each a workflow job:

1. :func:`train_index` draws a random sample across *all* shards of both sides of the pair,
   trains a spherical k-means quantizer on it (``nlist`` centroids) and, with ``compare: auto``,
   chooses which pairs the kNN jobs score from a recall probe on the sample
   (:func:`probe_recall`); the centroids and the choice are written as one ``.npz``
   (no pickle), atomically.
2. :func:`fill_index` assigns every row of one shard to its ``nprobe`` nearest lists (largest
   inner product with the centroid) and writes them with the choice; the first is the list the
   row is stored in.

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
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from psp.io import InputError, atomic_path
from psp.mine.config import IndexConfig
from psp.mine.shards import EmbeddingShard, open_embeddings

log = logging.getLogger(__name__)

KNN = tuple[np.ndarray, np.ndarray]  # (dist float32 (n, k) descending, ids int64 (n, k); -1 = none)

#: Neighbours per query of the recall probe (the margin's k by default).
PROBE_K = 4
#: Queries per direction of the recall probe: 4,000 neighbour pairs, a standard error of about
#: 0.007 on a recall near 0.8.
PROBE_QUERIES = 1000
#: ``compare: auto`` takes ``common_list`` where, on the probe, ``own_list`` finds a share of the
#: neighbours smaller than ``common_list``'s by more than this, in either direction ...
AUTO_RECALL_GAP = 0.05
#: ... and ``common_list``'s products, probing rows × probing rows per list, come to at most this
#: multiple of what equal lists would need: the es-en embeddings' came to 1.7, the synthetic
#: benchmark's hub lists (near very many rows) to 6.8 at 2M, where its kNN jobs ran over ten
#: times as long as ``own_list``'s.
AUTO_MAX_HUB_FACTOR = 3.0


@dataclass(frozen=True)
class Lists:
    """One shard's rows' nearest lists (rows × nprobe, own list first) and which pairs of them
    the kNN jobs score (``own_list`` or ``common_list``, chosen when the quantizer was trained)."""

    lists: np.ndarray
    compare: str


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


def write_no_index(*paths: str | os.PathLike) -> None:
    """The index files of a pair searched exactly: empty files (see :func:`load_lists`)."""
    for path in paths:
        with atomic_path(path):
            pass


def train_index(
    src_npy_paths: Sequence[str | os.PathLike],
    tgt_npy_paths: Sequence[str | os.PathLike],
    cfg: IndexConfig,
    out_quantizer: str | os.PathLike,
) -> tuple[np.ndarray, str]:
    """Train the pair's quantizer on a uniform sample of every shard of both sides; write and
    return its centroids and the ``compare`` the kNN jobs use.

    The number of lists follows the larger side (:meth:`IndexConfig.nlist_for`); the sample
    size and iterations are ``cfg``'s, so the job's memory is the sample (``train_rows`` rows)
    and its time ``train_iters`` passes of sample × centroids products. ``compare: auto`` is
    decided here, once for the pair, from :func:`probe_recall` on the sample; large lists are
    split (``list_split``) only for ``own_list``, whose work they unbalance.
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
    compare = cfg.compare
    if compare == "auto":
        n_src_sample = int(np.searchsorted(ids, n_src))  # ids are sorted: source rows first
        probe = probe_recall(sample, n_src_sample, centroids, cfg.nprobe, seed=cfg.seed)
        compare = choose_compare(probe)
        log.info("%s: compare %s", probe, compare)
    if compare == "own_list" and cfg.list_split is not None:
        centroids = split_large_lists(sample, centroids, cfg)
        log.info(
            "%d lists after splitting those over %.2f x the mean", len(centroids), cfg.list_split
        )
    with atomic_path(out_quantizer) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, centroids=centroids, compare=np.str_(compare))
    return centroids, compare


@dataclass(frozen=True)
class Probe:
    """What :func:`probe_recall` measured on the training sample: per ``compare``, the share of
    the probe's neighbour pairs it scores (source → target, target → source), and
    ``hub_factor``, ``common_list``'s row pairs over those of equal lists."""

    recall: dict[str, tuple[float, float]]
    hub_factor: float


def probe_recall(
    sample: np.ndarray, n_src: int, centroids: np.ndarray, nprobe: int, *, seed: int = 0
) -> Probe:
    """Recall of each ``compare`` on the training sample (its first ``n_src`` rows source rows,
    the others target rows): per direction, ``PROBE_QUERIES`` sampled rows' ``PROBE_K`` nearest
    rows of the other side's sampled rows (exact), and the share of those pairs each way of
    comparing would score at ``nprobe``; and from the same queries' probes, how far lists
    probed by many rows inflate ``common_list``'s products (``nlist · Σ p_src · p_tgt /
    nprobe²`` over the lists, ``p`` the share of a side's queries probing the list: 1 for equal
    lists).

    Among a sample the neighbours are further than among all rows (on the es-en embeddings the
    probe gave 0.78 / 0.74 for ``own_list`` and 0.96 / 0.95 for ``common_list``, against 0.80 /
    0.73 and 0.97 / 0.96 measured over every row; on the synthetic 1M benchmark 0.95 / 0.95
    and 0.98 / 0.99, against 0.99 measured for ``own_list``), so it is a somewhat pessimistic
    estimate. It costs a few seconds next to the k-means, and no copy of the sample.
    """
    quantizer = faiss.IndexFlatIP(centroids.shape[1])
    quantizer.add(centroids)
    nprobe = min(nprobe, len(centroids))
    rng = np.random.default_rng(seed)
    recall = {"own_list": [], "common_list": []}
    probed = []  # per side, the share of its queries probing each list
    for queries, base in ((sample[:n_src], sample[n_src:]), (sample[n_src:], sample[:n_src])):
        k = min(PROBE_K, len(base))
        if len(queries) == 0 or k == 0:
            for values in recall.values():
                values.append(1.0)
            probed.append(np.full(len(centroids), nprobe / len(centroids)))
            continue
        q = queries[rng.choice(len(queries), min(PROBE_QUERIES, len(queries)), replace=False)]
        neighbours = base[faiss.knn(q, base, k, metric=faiss.METRIC_INNER_PRODUCT)[1].ravel()]
        q_probes = quantizer.search(q, nprobe)[1][:, None, :]  # (queries, 1, nprobe)
        n_probes = quantizer.search(neighbours, nprobe)[1].reshape(len(q), k, nprobe)
        own = (n_probes[..., :1] == q_probes).any(-1) | (q_probes[..., :1] == n_probes).any(-1)
        common = (n_probes[..., :, None] == q_probes[..., None, :]).any((-1, -2))
        recall["own_list"].append(float(own.mean()))
        recall["common_list"].append(float(common.mean()))
        probed.append(np.bincount(q_probes.ravel(), minlength=len(centroids)) / len(q))
    hub_factor = float(len(centroids) * (probed[0] @ probed[1]) / nprobe**2)
    return Probe({key: tuple(values) for key, values in recall.items()}, hub_factor)


def choose_compare(probe: Probe) -> str:
    """``own_list`` (the cheaper products) unless the probe shows it missing over
    ``AUTO_RECALL_GAP`` of the neighbours in a direction where ``common_list`` finds them (the
    flat neighbourhoods of real sentence embeddings) and ``common_list`` costs at most
    ``AUTO_MAX_HUB_FACTOR`` times the products of equal lists; where it would cost more, the
    recall ``own_list`` gives up is logged, as ``nprobe`` or ``compare`` is then the user's call
    (docs/mining.md, Sizing)."""
    recall = probe.recall
    gap = max(c - o for o, c in zip(recall["own_list"], recall["common_list"], strict=True))
    if gap <= AUTO_RECALL_GAP:
        return "own_list"
    if probe.hub_factor <= AUTO_MAX_HUB_FACTOR:
        return "common_list"
    log.warning(
        "compare auto: own_list scores %.2f fewer of the probe's neighbour pairs than common_list,"
        " but common_list would compare %.1f x the pairs of equal lists (its products are probing"
        " rows x probing rows, and some lists are probed by very many rows): own_list; raise"
        " nprobe for more recall, or set compare: common_list",
        gap,
        probe.hub_factor,
    )
    return "own_list"


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


def load_quantizer(path: str | os.PathLike) -> tuple[np.ndarray, str]:
    """The centroids and ``compare`` that :func:`train_index` wrote."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return z["centroids"], str(z["compare"])
    except (OSError, ValueError, KeyError) as err:
        raise InputError(f"{path}: not a quantizer file: {err}") from err


def fill_index(
    quantizer_npz: str | os.PathLike,
    emb_npy: str | os.PathLike,
    out_lists: str | os.PathLike,
    *,
    nprobe: int,
    block_size: int = 65536,
) -> Lists:
    """Assign one shard's rows to their ``nprobe`` nearest lists; writes and returns them.

    Computed once per row here, the assignments spare each of the S kNN jobs of the shard's row
    of the grid the coarse search. ``out_lists`` is an ``.npz`` with ``lists`` (int32,
    rows × nprobe, nearest first: the row's own list is its first), ``nlist`` and ``compare``
    (the quantizer's, so every kNN job of the pair reads the same choice).
    """
    centroids, compare = load_quantizer(quantizer_npz)
    shard = open_embeddings(emb_npy)
    if shard.shape[1] != centroids.shape[1]:
        raise InputError(
            f"{emb_npy} has dim {shard.shape[1]}, the quantizer {quantizer_npz} {centroids.shape[1]}"
        )
    quantizer = faiss.IndexFlatIP(centroids.shape[1])
    quantizer.add(centroids)
    nprobe = min(nprobe, quantizer.ntotal)
    lists = np.empty((len(shard), nprobe), dtype=np.int32)
    for a in range(0, len(shard), block_size):
        block = shard.rows(a, a + block_size)
        lists[a : a + len(block)] = quantizer.search(block, nprobe)[1]
    with atomic_path(out_lists) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, lists=lists, nlist=np.int64(quantizer.ntotal), compare=np.str_(compare))
    return Lists(lists, compare)


def load_lists(path: str | os.PathLike) -> Lists | None:
    """What :func:`fill_index` wrote; ``None`` for the empty file of an exactly searched pair."""
    if Path(path).stat().st_size == 0:
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            lists, compare = z["lists"], str(z["compare"])
    except (OSError, ValueError, KeyError) as err:
        raise InputError(f"{path}: not a list assignment file: {err}") from err
    if lists.ndim != 2:
        raise InputError(f"{path}: list assignments of shape {lists.shape}, expected 2-D")
    return Lists(lists, compare)
