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
shards, and the lists are split over ``threads`` workers (torch releases the GIL in its ops; the
products per list are too small to split well inside one product).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

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
    """Group the entries of ``lists`` (rows × width) by list number (a stable counting sort)."""
    flat = np.ascontiguousarray(lists, dtype=np.int64).ravel()
    order = np.argsort(flat, kind="stable")
    bounds = np.searchsorted(flat[order], np.arange(nlist + 1))
    return Buckets(torch.from_numpy(order), bounds)


@dataclass
class Search:
    """One direction between two blocks: queries probing lists against rows stored in them."""

    queries: torch.Tensor  # float32 (nq, d)
    base: torch.Tensor  # float32 (nb, d)
    probes: Buckets  # query slots per list
    stored: Buckets  # base rows per list
    nprobe: int
    k: int

    def run_lists(self, lists: range, out_d: torch.Tensor, out_i: torch.Tensor) -> None:
        """Each list's product and its top-k per query, into the queries' slots of that list."""
        probes, stored = self.probes, self.stored
        for lst in lists:
            q0, q1 = probes.bounds[lst], probes.bounds[lst + 1]
            b0, b1 = stored.bounds[lst], stored.bounds[lst + 1]
            if q0 == q1 or b0 == b1:
                continue
            slots, rows = probes.rows[q0:q1], stored.rows[b0:b1]
            sim = self.queries[slots // self.nprobe] @ self.base[rows].T
            top, pos = torch.topk(sim, min(self.k, int(b1 - b0)), dim=1)
            out_d[slots, : top.shape[1]] = top
            out_i[slots, : top.shape[1]] = rows[pos]

    def top_k(self, threads: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-k of every query over its probed lists; ids are rows of ``base``, -1 if missing."""
        nq, k, nlist = len(self.queries), self.k, len(self.stored.bounds) - 1
        out_d = torch.full((nq * self.nprobe, k), -torch.inf)
        out_i = torch.full((nq * self.nprobe, k), -1, dtype=torch.int64)
        chunks = [range(start, nlist, threads) for start in range(threads)]
        previous = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(lambda chunk: self.run_lists(chunk, out_d, out_i), chunks))
        finally:
            torch.set_num_threads(previous)
        top, pos = torch.topk(out_d.view(nq, -1), k, dim=1)
        return top, torch.gather(out_i.view(nq, -1), 1, pos)


def _merge(dist: torch.Tensor, ids: torch.Tensor, rows: slice, new: tuple, offset: int) -> None:
    """Merge a block's top-k (ids local to the block, -1 missing) into the running top-k."""
    d_new, i_new = new
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
    one quantizer. Rows whose probed lists hold fewer than ``k`` rows are
    padded with ``(-inf, -1)``.
    """
    threads = threads or torch.get_num_threads()
    nlist = 1 + max(int(lists.max(initial=-1)) for lists in (src_lists, tgt_lists))
    fwd_d, fwd_i = torch.full((len(src), k), -torch.inf), torch.full((len(src), k), -1)
    bwd_d, bwd_i = torch.full((len(tgt), k), -torch.inf), torch.full((len(tgt), k), -1)
    for a in range(0, len(src), block_rows):
        xs, ls = torch.from_numpy(read_rows(src, a, a + block_rows)), src_lists[a : a + block_rows]
        for c in range(0, len(tgt), block_rows):
            xt = torch.from_numpy(read_rows(tgt, c, c + block_rows))
            lt = tgt_lists[c : c + block_rows]
            for queries, base, lq, lb, out, rows, offset in (
                (xs, xt, ls, lt, (fwd_d, fwd_i), slice(a, a + len(xs)), c),
                (xt, xs, lt, ls, (bwd_d, bwd_i), slice(c, c + len(xt)), a),
            ):
                search = Search(
                    queries, base, buckets(lq, nlist), buckets(lb[:, :1], nlist), lq.shape[1], k
                )
                _merge(*out, rows, search.top_k(threads), offset)
    return (fwd_d.numpy(), fwd_i.numpy()), (bwd_d.numpy(), bwd_i.numpy())
