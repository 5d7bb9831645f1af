"""List-major inverted-file search with exact scores, both directions, between two shards.

Searched query by query, an inverted file reads every probed list once per query: for each of
``nprobe`` lists a few hundred rows of 4 KiB, decoded vector by vector, so the search is bound by
memory traffic. Searched list by list (the pattern of Faiss's ``contrib/big_batch_search.py``),
the same work is one matrix product per list: all the queries that probe the list against the
list's rows. Each row of both shards was assigned once to its ``nprobe`` nearest lists
(:func:`psp.mine.index.fill_index`); it is stored in the first of them and probes all of them.

The products run over the stored embeddings in float32, so every score is the exact inner
product; only which rows are compared is approximate. Each (query, probed list) pair has a slot
for its top-k; after all lists, a query's ``nprobe · k`` slots are reduced to its top-k.
The shards are read in blocks of at most ``block_rows`` rows, so a job holds two blocks, not two
shards, and the lists are split over ``threads`` workers (Faiss and torch release the GIL; the
products per list are too small to split well inside one product).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import faiss
import numpy as np
import torch

from psp.mine.index import KNN
from psp.mine.shards import read_rows


@dataclass
class Buckets:
    """Rows grouped by list: the rows of list ``l`` are ``rows[bounds[l]:bounds[l + 1]]``."""

    rows: torch.Tensor  # int64; for queries, slot numbers row * nprobe + probe
    bounds: np.ndarray  # int64 (nlist + 1,)


def buckets(lists: np.ndarray, nlist: int) -> Buckets:
    """Group the entries of ``lists`` (rows × width) by list number, in row order within a list
    (a stable sort: NumPy's radix sort for list numbers that fit 16 bits, four times faster)."""
    flat = np.ascontiguousarray(lists).ravel()
    flat = flat.astype(np.uint16 if nlist <= 1 << 16 else np.int64, copy=False)
    order = np.argsort(flat, kind="stable")
    bounds = np.searchsorted(flat[order], np.arange(nlist + 1))
    return Buckets(torch.from_numpy(order), bounds)


@dataclass(kw_only=True)
class Search:
    """One direction between two blocks: queries probing lists against rows stored in them."""

    queries: torch.Tensor  # float32 (nq, d)
    base: np.ndarray  # float32 (nb, d)
    probes: Buckets  # query slots per list
    stored: Buckets  # base rows per list
    nprobe: int
    k: int

    def run_lists(self, lists: range, out_d: np.ndarray, out_i: np.ndarray) -> None:
        """Each list's product and its top-k per query, into the queries' slots of that list.

        ``faiss.knn`` does the product and the top-k selection in one call (blocked sgemm and a
        heap, twice as fast as a product and ``torch.topk`` at these shapes); the queries are
        gathered into one reused buffer, since a fresh 5 MB array per list costs more in page
        faults than the copy itself.
        """
        faiss.omp_set_num_threads(1)  # per thread in OpenMP: this worker's Faiss and BLAS calls
        probes, stored = self.probes, self.stored
        width = int(np.diff(probes.bounds).max(initial=0))
        buffer = torch.empty((width, self.queries.shape[1]))
        for lst in lists:
            q0, q1 = probes.bounds[lst], probes.bounds[lst + 1]
            b0, b1 = stored.bounds[lst], stored.bounds[lst + 1]
            if q0 == q1 or b0 == b1:
                continue
            slots, rows = probes.rows[q0:q1], stored.rows[b0:b1].numpy()
            queries = buffer[: q1 - q0]
            torch.index_select(self.queries, 0, slots // self.nprobe, out=queries)
            kk = min(self.k, int(b1 - b0))
            dist, pos = faiss.knn(
                queries.numpy(), self.base[rows], kk, metric=faiss.METRIC_INNER_PRODUCT
            )
            out_d[slots.numpy(), :kk] = dist
            out_i[slots.numpy(), :kk] = rows[pos]

    def top_k(self, threads: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-k of every query over its probed lists; ids are rows of ``base``, -1 if missing."""
        nq, k, nlist = len(self.queries), self.k, len(self.stored.bounds) - 1
        out_d = np.full((nq * self.nprobe, k), -np.inf, dtype=np.float32)
        out_i = np.full((nq * self.nprobe, k), -1, dtype=np.int64)
        chunks = [range(start, nlist, threads) for start in range(threads)]
        previous = torch.get_num_threads()
        torch.set_num_threads(1)  # one list per thread: the products are too small to split
        try:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(lambda chunk: self.run_lists(chunk, out_d, out_i), chunks))
        finally:
            torch.set_num_threads(previous)
        top, pos = torch.topk(torch.from_numpy(out_d).view(nq, -1), k, dim=1)
        return top, torch.gather(torch.from_numpy(out_i).view(nq, -1), 1, pos)


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
    block_rows: int = 131072,
    threads: int | None = None,
) -> tuple[KNN, KNN]:
    """Top-k inner product src→tgt and tgt→src over the probed lists, ids local to each shard.

    ``src``/``tgt`` are float arrays or :class:`~psp.mine.shards.EmbeddingShard` files;
    ``src_lists``/``tgt_lists`` their rows' nearest lists (rows × nprobe, own list first), from
    one quantizer. Rows whose probed lists hold fewer than ``k`` rows are padded with
    ``(-inf, -1)``. Memory: two blocks of ``block_rows`` rows (512 MiB each at dim 1024 in
    float32) and ``nprobe · k`` candidate slots per row of a block.
    """
    threads = threads or torch.get_num_threads()
    nlist = 1 + max(int(lists.max(initial=-1)) for lists in (src_lists, tgt_lists))
    fwd = torch.full((len(src), k), -torch.inf), torch.full((len(src), k), -1)
    bwd = torch.full((len(tgt), k), -torch.inf), torch.full((len(tgt), k), -1)
    for a in range(0, len(src), block_rows):
        xs, ls = read_rows(src, a, a + block_rows), src_lists[a : a + block_rows]
        for c in range(0, len(tgt), block_rows):
            lt = tgt_lists[c : c + block_rows]
            # freed before the next is read: two blocks in memory, never three
            xt = read_rows(tgt, c, c + block_rows)
            new_fwd, new_bwd = _block_pair(xs, xt, ls=ls, lt=lt, k=k, threads=threads, nlist=nlist)
            del xt
            _merge(fwd, slice(a, a + len(xs)), new_fwd, c)
            _merge(bwd, slice(c, c + len(lt)), new_bwd, a)
    return (fwd[0].numpy(), fwd[1].numpy()), (bwd[0].numpy(), bwd[1].numpy())


def _block_pair(xs, xt, *, ls, lt, k: int, threads: int, nlist: int) -> list:
    """Both directions between a source and a target block (ids local to the blocks)."""
    results = []
    for queries, base, lq, lb in ((xs, xt, ls, lt), (xt, xs, lt, ls)):
        search = Search(
            queries=torch.from_numpy(queries),
            base=base,
            probes=buckets(lq, nlist),
            stored=buckets(lb[:, :1], nlist),
            nprobe=lq.shape[1],
            k=k,
        )
        results.append(search.top_k(threads))
    return results
