"""List-major inverted-file search with exact scores, both directions, between two shards.

Searched query by query, an inverted file reads every probed list once per query: for each of
``nprobe`` lists a few hundred rows of 4 KiB, decoded vector by vector, so the search is bound by
memory traffic. Searched list by list (the pattern of Faiss's ``contrib/big_batch_search.py``),
the same work is a few matrix products per list. Each row of both shards was assigned once to
its ``nprobe`` nearest lists (:func:`psp.mine.index.fill_index`) and is stored in the first.
Each product counts for both of its sides: its row-wise top-k gives its rows candidates, its
column-wise top-k its columns. Which pairs are scored (``IndexConfig.compare``):

- ``own_list`` (``common_lists=False``): per list, the source rows probing it against the
  target rows stored in it, and the source rows stored in it against the other target rows
  probing it. A pair is compared when either row probes the other's own list. The products are
  thin (hundreds of probing rows against tens of stored ones); on the synthetic benchmark this
  is the fastest way to a given recall.
- ``common_list``: per list, the source rows probing it against the target rows probing it. A
  pair is compared when the two rows probe a common list: ``nprobe / 2`` times the pairs at equal
  ``nprobe``, but in products of hundreds of rows on both sides, which run near the machine's
  matrix-product rate, and the added pairs are near ones that lie across a list boundary. On
  the es-en model's embeddings, whose neighbourhoods are flat, recall@4 at ``nprobe`` 16 rose
  from 0.80 / 0.73 to 0.95 / 0.93 for 3 times the kNN time (docs/mining.md, Sizing).

The products run over the stored embeddings in float32, so every score is the exact inner
product; only which rows are compared is approximate. A row has a slot of ``k`` per probed list;
after all lists its ``nprobe · k`` candidates, a row found in several lists counted once, are
reduced to its top-k. The shards are read in blocks of at most ``block_bytes`` (float16 shards
stay float16 in memory, converted to float32 row by row as they are gathered for a product, so
a block holds twice the rows), so a job holds two blocks, not two shards, and the lists are
split over ``threads`` workers (NumPy and torch release the GIL; the products per list are too
small to split well inside one product).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import faiss
import numpy as np
import torch
from threadpoolctl import threadpool_limits

from psp.mine.index import KNN
from psp.mine.shards import read_dtype, read_rows

#: Most bytes of one side's rows a job holds at a time: 262,144 rows of dim 1024 in float16,
#: half that in float32.
BLOCK_BYTES = 512 << 20
#: Most scores one product holds (16 MiB of float32): larger lists are multiplied in chunks.
PRODUCT_SIZE = 1 << 22


@dataclass
class Buckets:
    """Probe entries grouped by list, those stored in the list first: the entries of list
    ``l`` are ``entries[bounds[2l]:bounds[2l + 2]]``, its stored rows' ``[bounds[2l]:bounds[2l +
    1]]``. An entry is ``row * nprobe + rank`` (rank 0: the row's own list)."""

    entries: torch.Tensor  # int64
    bounds: np.ndarray  # int64 (2 nlist + 1,)


def buckets(lists: np.ndarray, nlist: int) -> Buckets:
    """Group the entries of ``lists`` (rows × nprobe) by list, own entries first, in row order
    within each group (a stable sort: NumPy's radix sort for keys that fit 16 bits, four times
    faster)."""
    key = 2 * np.asarray(lists, dtype=np.int64) + (np.arange(lists.shape[1]) > 0)
    key = key.ravel().astype(np.uint16 if 2 * nlist <= 1 << 16 else np.int64)
    order = np.argsort(key, kind="stable")
    bounds = np.searchsorted(key[order], np.arange(2 * nlist + 1))
    return Buckets(torch.from_numpy(order), bounds)


class Side:
    """One block's rows, the lists each probes, and a candidate slot of ``k`` per probed list.

    The slots are kept in the order of :func:`buckets`, so that the rows probing a list, those
    stored in it and the others are each one contiguous range of slots: every product of a list
    merges its row-wise top-k into one range and its column-wise top-k into another. A slot's
    ids are slots of the other side (:meth:`top_k` turns them into rows).
    """

    def __init__(self, x: np.ndarray, lists: np.ndarray, *, nlist: int, k: int):
        self.x, self.k = torch.from_numpy(x), k
        self.nprobe = lists.shape[1]
        self.probes = buckets(lists, nlist)
        self.dist = np.empty((len(x) * self.nprobe, k), dtype=np.float32)
        self.pos = np.empty((len(x) * self.nprobe, k), dtype=np.int64)
        self.heaps = _heaps(self.dist, self.pos)
        self.heaps.heapify()  # (-inf, -1) everywhere

    def probing(self, lst: int, *, own: bool | None = None) -> tuple[int, torch.Tensor]:
        """The first slot of the rows probing ``lst``, and the rows; ``own`` True: only those
        stored in it (whose nearest list it is), False: only the others."""
        bounds = self.probes.bounds
        start = bounds[2 * lst + (own is False)]
        stop = bounds[2 * lst + (1 if own else 2)]
        return int(start), self.probes.entries[start:stop] // self.nprobe

    def add_rows(self, first: int, scores: np.ndarray, first_id: int) -> None:
        """Merge each row of ``scores`` into the slot from ``first`` on, its columns' ids
        counted from ``first_id`` (Faiss's heap update, in place, without the GIL)."""
        n, width = scores.shape
        self.heaps.addn(width, faiss.swig_ptr(scores), first_id, first, n)

    def top_k(
        self, other: Side, *, repeats: int, chunk_rows: int = 16384
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's top-k over its slots, a candidate found in several lists counted once; ids
        are rows of ``other``'s block, -1 where missing. Reduced ``chunk_rows`` rows at a time,
        so the gathered candidates add a few MB to the job's memory, not a block's worth."""
        self.heaps.reorder()
        slot_of = _inverse(self.probes.entries).reshape(len(self.x), -1)  # (row, rank) -> slot
        other_rows = other.probes.entries.numpy() // other.nprobe
        top, ids = [], []
        for a in range(0, len(self.x), chunk_rows):
            slots = slot_of[a : a + chunk_rows].ravel()
            pos = self.pos[slots]
            found = pos >= 0
            rows = len(slots) // self.nprobe
            dist = np.where(found, self.dist[slots], -np.inf).reshape(rows, -1)
            cand = np.where(found, other_rows[np.where(found, pos, 0)], -1).reshape(rows, -1)
            chunk = _unique_top_k(torch.from_numpy(dist), torch.from_numpy(cand), self.k, repeats)
            top.append(chunk[0])
            ids.append(chunk[1])
        return torch.cat(top), torch.cat(ids)


def _inverse(permutation: torch.Tensor) -> np.ndarray:
    inverse = np.empty(len(permutation), dtype=np.int64)
    inverse[permutation.numpy()] = np.arange(len(permutation))
    return inverse


def _unique_top_k(
    dist: torch.Tensor, ids: torch.Tensor, k: int, repeats: int
) -> tuple[torch.Tensor, ...]:
    """Row-wise top-k of candidates (-1 = none), each id counted once.

    An id is among a row's candidates at most ``repeats`` times (twice with ``own_list``: in
    the slot of the list it is stored in and in the row's own list's; once per common list with
    ``common_list``), so the row's ``repeats · k`` best candidates hold its ``k`` best distinct
    ids: only those are deduplicated (with ``own_list``, 0.4 × the time of all of them).
    """
    if dist.shape[1] > repeats * k:
        dist, pos = torch.topk(dist, repeats * k, dim=1)
        ids = torch.gather(ids, 1, pos)
    by_id, order = torch.sort(ids, dim=1, stable=True)
    repeat = torch.zeros_like(by_id, dtype=torch.bool)
    repeat[:, 1:] = (by_id[:, 1:] == by_id[:, :-1]) & (by_id[:, 1:] >= 0)
    dist = dist.masked_fill(torch.zeros_like(repeat).scatter_(1, order, repeat), -torch.inf)
    top, pos = torch.topk(dist, k, dim=1)
    return top, torch.where(top > -torch.inf, torch.gather(ids, 1, pos), -1)


def _heaps(dist: np.ndarray, ids: np.ndarray) -> faiss.float_minheap_array_t:
    """Faiss min-heaps over the rows of ``dist``/``ids``: each keeps the ``k`` largest values."""
    heaps = faiss.float_minheap_array_t()
    heaps.nh, heaps.k = dist.shape
    heaps.val, heaps.ids = faiss.swig_ptr(dist), faiss.swig_ptr(ids)
    return heaps


def compared_pairs(
    src_lists: np.ndarray, tgt_lists: np.ndarray, nlist: int, *, common_lists: bool = False
) -> int:
    """Row pairs the list-major search multiplies (:func:`ivf_knn_both_directions`)."""
    count = lambda lists: np.bincount(lists.ravel(), minlength=nlist)  # noqa: E731
    if common_lists:
        return int(count(src_lists) @ count(tgt_lists))
    src_own, tgt_own = count(src_lists[:, 0]), count(tgt_lists[:, 0])
    return int(count(src_lists) @ tgt_own + src_own @ (count(tgt_lists) - tgt_own))


def _scan(src: Side, tgt: Side, lst: int, *, common: bool, buffers: dict) -> None:
    """The products of one list: with ``common``, the source rows probing it against the target
    rows probing it; otherwise the source rows probing it against the target rows stored in it,
    and the other target rows probing it against the source rows stored in it (so that no pair
    is scored twice; both products tall, the probing rows as their rows, whose top-k along a
    row is a heap update straight from the product)."""
    if common:
        _product(src, src.probing(lst), tgt, tgt.probing(lst), buffers)
        return
    _product(src, src.probing(lst), tgt, tgt.probing(lst, own=True), buffers)
    _product(tgt, tgt.probing(lst, own=False), src, src.probing(lst, own=True), buffers)


def _product(a: Side, a_part: tuple, b: Side, b_part: tuple, buffers: dict) -> None:
    """Rows of side ``a`` against rows of side ``b`` (each part: its first slot and its rows), in
    chunks of ``a`` rows of at most ``PRODUCT_SIZE`` scores (a list probed by thousands of rows
    of both sides would otherwise need a product of hundreds of MB). The top-k of each product
    row is merged into its ``a`` slot, the top-k of each column into its ``b`` slot."""
    (a_first, a_rows), (b_first, b_rows) = a_part, b_part
    nb = len(b_rows)
    if len(a_rows) == 0 or nb == 0:
        return
    right = _gather(b.x, b_rows, buffers, "b").numpy()
    chunk = max(1, PRODUCT_SIZE // nb)
    for c0 in range(0, len(a_rows), chunk):
        rows = a_rows[c0 : c0 + chunk]
        na = len(rows)
        left = _gather(a.x, rows, buffers, "a").numpy()
        # NumPy's OpenBLAS, not torch.mm: on these small products it ran 1.3 x faster on one
        # thread (60 against 47 GFLOP/s for 400 x 26 at dim 1024)
        sim = np.matmul(left, right.T, out=buffers["sim"][: na * nb].view(na, nb).numpy())
        a.add_rows(a_first + c0, sim, b_first)
        # the columns' top-k as rows of the transpose: a heap update per score, like the rows',
        # where a top-k along the columns of the product cost twice as much
        columns = buffers["columns"][: na * nb].view(nb, na).numpy()
        np.copyto(columns, sim.T)
        b.add_rows(b_first, columns, a_first + c0)


def _gather(x: torch.Tensor, rows: torch.Tensor, buffers: dict, operand: str) -> torch.Tensor:
    """Rows of ``x`` into the float32 buffer of ``operand``, through a float16 one where ``x``
    is float16 (the conversion is exact)."""
    out = buffers[operand][: len(rows)]
    if x.dtype == torch.float32:
        return torch.index_select(x, 0, rows, out=out)
    staged = torch.index_select(x, 0, rows, out=buffers[f"{operand}16"][: len(rows)])
    return out.copy_(staged)


def _merge(running: tuple, rows: slice, new: tuple, offset: int) -> None:
    """Merge a block's top-k (ids local to the block, -1 missing) into the running top-k."""
    (dist, ids), (d_new, i_new) = running, new
    i_new = torch.where(i_new >= 0, i_new + offset, -1)
    d = torch.cat([dist[rows], d_new], dim=1)
    i = torch.cat([ids[rows], i_new], dim=1)
    top, pos = torch.topk(d, dist.shape[1], dim=1)
    dist[rows], ids[rows] = top, torch.gather(i, 1, pos)


def ivf_knn_both_directions(
    src,
    tgt,
    *,
    src_lists: np.ndarray,
    tgt_lists: np.ndarray,
    k: int,
    common_lists: bool = False,
    block_bytes: int = BLOCK_BYTES,
    threads: int | None = None,
) -> tuple[KNN, KNN]:
    """Top-k inner product src→tgt and tgt→src over the probed lists, ids local to each shard.

    ``src``/``tgt`` are float arrays or :class:`~psp.mine.shards.EmbeddingShard` files;
    ``src_lists``/``tgt_lists`` their rows' nearest lists (rows × nprobe, own list first), from
    one quantizer; ``common_lists`` scores the pairs that probe a common list, not those where
    one row probes the other's own list (see the module). Rows whose probed lists hold fewer
    than ``k`` rows are padded with ``(-inf, -1)``. Memory: two blocks of at most
    ``block_bytes`` each, ``nprobe · k`` candidate slots per row of a block, and per worker one
    product of at most ``PRODUCT_SIZE`` scores with its operands.
    """
    threads = threads or torch.get_num_threads()
    nlist = 1 + max(int(lists.max(initial=-1)) for lists in (src_lists, tgt_lists))
    fwd = torch.full((len(src), k), -torch.inf), torch.full((len(src), k), -1)
    bwd = torch.full((len(tgt), k), -torch.inf), torch.full((len(tgt), k), -1)
    rows_s, rows_t = (
        max(1, block_bytes // (x.shape[1] * read_dtype(x, keep_float16=True).itemsize))
        for x in (src, tgt)
    )
    for a in range(0, len(src), rows_s):
        xs, ls = read_rows(src, a, a + rows_s, keep_float16=True), src_lists[a : a + rows_s]
        for c in range(0, len(tgt), rows_t):
            lt = tgt_lists[c : c + rows_t]
            # freed before the next is read: two blocks in memory, never three
            xt = read_rows(tgt, c, c + rows_t, keep_float16=True)
            new_fwd, new_bwd = _block_pair(
                xs, xt, ls=ls, lt=lt, k=k, common=common_lists, threads=threads, nlist=nlist
            )
            del xt
            _merge(fwd, slice(a, a + len(xs)), new_fwd, c)
            _merge(bwd, slice(c, c + len(lt)), new_bwd, a)
    return (fwd[0].numpy(), fwd[1].numpy()), (bwd[0].numpy(), bwd[1].numpy())


def _block_pair(xs, xt, *, ls, lt, k: int, common: bool, threads: int, nlist: int) -> list:
    """Both directions between a source and a target block (ids local to the blocks), the
    lists split over ``threads`` workers."""
    src, tgt = Side(xs, ls, nlist=nlist, k=k), Side(xt, lt, nlist=nlist, k=k)

    def scan_lists(lists: range) -> None:
        faiss.omp_set_num_threads(1)  # per thread in OpenMP: this worker's heap updates
        buffers = _buffers(src, tgt, lists, dim=xs.shape[1])
        for lst in lists:
            _scan(src, tgt, lst, common=common, buffers=buffers)

    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # one list per thread: the products are too small to split
    try:
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(threads) as pool:
            list(pool.map(scan_lists, [range(start, nlist, threads) for start in range(threads)]))
    finally:
        torch.set_num_threads(previous)
    repeats = src.nprobe if common else 2
    return [src.top_k(tgt, repeats=repeats), tgt.top_k(src, repeats=repeats)]


def _buffers(src: Side, tgt: Side, lists: range, *, dim: int) -> dict:
    """A worker's reused operands and product, sized for its largest list (either side may be
    a product's rows): a fresh few-MB array per list costs more in page faults than the copy
    into it."""
    idx = np.asarray(lists, dtype=np.int64)  # empty where there are more workers than lists
    ns, nt = (int(np.diff(side.probes.bounds[::2])[idx].max(initial=0)) for side in (src, tgt))
    rows = max(ns, nt)
    half = (rows, dim) if torch.float16 in (src.x.dtype, tgt.x.dtype) else (0, dim)
    return {
        "a": torch.empty((rows, dim)),
        "b": torch.empty((rows, dim)),
        "a16": torch.empty(half, dtype=torch.float16),
        "b16": torch.empty(half, dtype=torch.float16),
        "sim": torch.empty(max(min(ns * nt, PRODUCT_SIZE), rows)),
        "columns": torch.empty(max(min(ns * nt, PRODUCT_SIZE), rows)),
    }
