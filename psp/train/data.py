"""The epoch order of the training pairs, read from the HDF5 file in bounded memory.

Every epoch is a fresh permutation of the pairs, drawn from ``(seed, epoch)`` alone, so a run
is reproducible and a resumed run recomputes the order it was killed in. Reading pairs one by
one at random would cost one HDF5 access per pair, so the permutation has two levels:

1. the file is cut into blocks of :data:`SHUFFLE_BLOCK` consecutive pairs and the blocks are
   permuted;
2. consecutive permuted blocks form windows of one capped mega-batch
   (``megabatch_size * batch_size`` pairs); a window is read in file order (contiguous runs of
   blocks) and its pairs are permuted.

Minibatches and mega-batches are therefore random subsets of the corpus that change every
epoch; only the pairs of one block (already shuffled on disk by :mod:`psp.data.pairs_store`)
always meet in the same window. Memory holds the block permutation (``n / 64`` integers) and a
window or two, whatever the corpus size.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import torch

from psp.train.bags import Bags, concat_bags, truncated_bags
from psp.train.config import TrainConfig, megabatch_size_at

#: Pairs per contiguous on-disk block of the shuffle (part of the order: fixed on resume).
SHUFFLE_BLOCK = 64

T = TypeVar("T")


class EpochOrder:
    """The order of one epoch: position ``i`` of the epoch stream is file pair ``indices(i)``.

    Args:
        n_pairs: pairs in the file.
        seed, epoch: the order is a function of these (and the sizes) only.
        window_pairs: pairs per window, rounded down to whole blocks (at least one).
        block: pairs per on-disk block.
    """

    def __init__(
        self, n_pairs: int, *, seed: int, epoch: int, window_pairs: int, block: int = SHUFFLE_BLOCK
    ):
        self.n_pairs, self.seed, self.epoch, self.block = n_pairs, seed, epoch, block
        n_blocks = math.ceil(n_pairs / block)
        self.blocks = np.random.default_rng([seed, epoch]).permutation(n_blocks)
        self.per_window = max(1, window_pairs // block)
        lengths = np.full(n_blocks, block, dtype=np.int64)
        if n_blocks:
            lengths[-1] = n_pairs - (n_blocks - 1) * block
        starts = np.arange(0, n_blocks, self.per_window)
        sizes = np.add.reduceat(lengths[self.blocks], starts) if n_blocks else starts
        #: ``bounds[k]:bounds[k + 1]`` are the stream positions of window ``k``.
        self.bounds = np.concatenate([[0], np.cumsum(sizes)])

    def __len__(self) -> int:
        return self.n_pairs

    @property
    def n_windows(self) -> int:
        return len(self.bounds) - 1

    def window_runs(self, k: int) -> list[tuple[int, int]]:
        """File slices ``[start, stop)`` holding window ``k``'s pairs, in file order."""
        blocks = np.sort(self.blocks[k * self.per_window : (k + 1) * self.per_window])
        breaks = np.flatnonzero(np.diff(blocks) != 1) + 1
        firsts = np.concatenate([[0], breaks])
        lasts = np.concatenate([breaks, [len(blocks)]]) - 1
        return [
            (int(blocks[a]) * self.block, min(self.n_pairs, (int(blocks[b]) + 1) * self.block))
            for a, b in zip(firsts, lasts)
        ]

    def window_permutation(self, k: int) -> np.ndarray:
        """Order of window ``k``'s pairs, as positions in its runs read one after the other."""
        size = int(self.bounds[k + 1] - self.bounds[k])
        return np.random.default_rng([self.seed, self.epoch, k]).permutation(size)

    def indices(self, start: int, stop: int) -> np.ndarray:
        """File pair indices of stream positions ``[start, stop)`` (for checks and tests; the
        trainer reads whole windows instead)."""
        out = []
        for k in self.windows_between(start, stop):
            in_file = np.concatenate([np.arange(a, b) for a, b in self.window_runs(k)])
            lo, hi = self.bounds[k], self.bounds[k + 1]
            out.append(
                in_file[self.window_permutation(k)][max(start, lo) - lo : min(stop, hi) - lo]
            )
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def windows_between(self, start: int, stop: int) -> range:
        """The windows that hold stream positions ``[start, stop)``."""
        first = int(np.searchsorted(self.bounds, start, side="right")) - 1
        last = int(np.searchsorted(self.bounds, stop, side="left"))
        return range(max(first, 0), min(last, self.n_windows))


class EpochStream:
    """An epoch's pairs in :class:`EpochOrder`, read window by window from a ``PairReader``.

    The last window read is kept, since consecutive mega-batches below the cap share windows.
    Reads must come from one thread at a time (the trainer's prefetch thread).
    """

    def __init__(self, reader, order: EpochOrder, max_pieces: int | None):
        self.reader, self.order, self.max_pieces = reader, order, max_pieces
        self._window: tuple[int, Bags, Bags] | None = None

    def __len__(self) -> int:
        return len(self.order)

    def _read_window(self, k: int) -> tuple[Bags, Bags]:
        if self._window is None or self._window[0] != k:
            src, tgt = [], []
            for start, stop in self.order.window_runs(k):
                batch = self.reader.read(start, stop)
                src.append(truncated_bags(batch.src_ids, batch.src_offsets, self.max_pieces))
                tgt.append(truncated_bags(batch.tgt_ids, batch.tgt_offsets, self.max_pieces))
            permutation = torch.from_numpy(self.order.window_permutation(k))
            self._window = (
                k,
                concat_bags(src).select(permutation),
                concat_bags(tgt).select(permutation),
            )
        return self._window[1], self._window[2]

    def read(self, start: int, stop: int) -> tuple[Bags, Bags]:
        """Pairs ``[start, stop)`` of the epoch stream as ``(src, tgt)``."""
        src, tgt = [], []
        for k in self.order.windows_between(start, stop):
            lo, hi = int(self.order.bounds[k]), int(self.order.bounds[k + 1])
            window_src, window_tgt = self._read_window(k)
            a, b = max(start, lo) - lo, min(stop, hi) - lo
            src.append(window_src.slice(a, b))
            tgt.append(window_tgt.slice(a, b))
        return concat_bags(src), concat_bags(tgt)


def megabatch_windows(
    n_pairs: int, pos: int, step: int, cfg: TrainConfig
) -> Iterator[tuple[int, int, int]]:
    """Yield ``(start, stop, step_at_start)`` of the rest of an epoch, from stream ``pos``.

    A tail of fewer than two pairs is dropped: it has no negative to mine.
    """
    while n_pairs - pos >= 2:
        m = megabatch_size_at(step, cfg.anneal, cfg.megabatch_size)
        stop = min(n_pairs, pos + m * cfg.batch_size)
        yield pos, stop, step
        step += math.ceil((stop - pos) / cfg.batch_size)
        pos = stop


@contextlib.contextmanager
def prefetched(read: Callable[..., T], ranges: Sequence[tuple]) -> Iterator[Iterator[T]]:
    """``read(*r)`` for each of ``ranges`` in turn, the next one read in a background thread
    while the caller works on the current one; leaving the block waits for a pending read."""

    def results() -> Iterator[T]:
        future = pool.submit(read, *ranges[0]) if ranges else None
        for i in range(len(ranges)):
            result = future.result()
            if i + 1 < len(ranges):
                future = pool.submit(read, *ranges[i + 1])
            yield result

    with ThreadPoolExecutor(max_workers=1) as pool:
        yield results()
