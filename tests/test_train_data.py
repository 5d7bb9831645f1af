"""The training data order: the annealed mega-batch windows, a fresh permutation of the pairs every
epoch (checked at corpus sizes where the former block order repeated most minibatches), and the
stream that reads it window by window."""

from __future__ import annotations

import numpy as np
import pytest

from psp.data.pairs_store import PairBatch
from psp.train import EpochOrder, EpochStream, TrainConfig, megabatch_size_at, megabatch_windows

BATCH, CAP = 128, 100


def test_megabatch_size_anneals_and_never_resets():
    sizes = [megabatch_size_at(step, anneal=150, cap=100) for step in (0, 149, 150, 299, 300)]
    assert sizes == [1, 1, 2, 2, 3]
    assert megabatch_size_at(10**7, 150, 100) == 100
    # a windows resumed mid-epoch continues the global schedule
    cfg = TrainConfig(batch_size=10, anneal=3, megabatch_size=4)
    windows = list(megabatch_windows(200, 0, 0, cfg))
    assert [stop - start for start, stop, _ in windows[:5]] == [10, 10, 10, 20, 20]
    resumed = list(megabatch_windows(200, windows[3][0], windows[3][2], cfg))
    assert resumed == windows[3:]
    assert windows[-1][1] == 200


@pytest.mark.parametrize(
    ("n_pairs", "window", "block"),
    [(1, 12800, 64), (63, 128, 64), (1000, 100, 64), (9999, 640, 32)],
)
def test_every_epoch_order_is_a_permutation(n_pairs, window, block):
    orders = [
        EpochOrder(n_pairs, seed=7, epoch=epoch, window_pairs=window, block=block)
        for epoch in (0, 1)
    ]
    for order in orders:
        indices = order.indices(0, n_pairs)
        assert sorted(indices.tolist()) == list(range(n_pairs))
        # any sub-range is the same slice of the whole
        assert order.indices(n_pairs // 3, n_pairs // 2).tolist() == list(
            indices[n_pairs // 3 : n_pairs // 2]
        )
    if n_pairs > block:
        assert orders[0].indices(0, n_pairs).tolist() != orders[1].indices(0, n_pairs).tolist()
    again = EpochOrder(n_pairs, seed=7, epoch=1, window_pairs=window, block=block).indices(
        0, n_pairs
    )
    assert np.array_equal(again, orders[1].indices(0, n_pairs))  # a function of seed and epoch


def _repeats(first: np.ndarray, second: np.ndarray, size: int) -> tuple[float, float]:
    """Between two epoch orders: the share of groups of ``size`` consecutive positions holding
    the same pairs in both, and the share of pairs that meet again a pair of their first-epoch
    group in their second-epoch group."""
    n = len(first) // size * size
    as_sets = [
        {tuple(g) for g in np.sort(o[:n].reshape(-1, size), axis=1).tolist()}
        for o in (first, second)
    ]
    identical = len(as_sets[0] & as_sets[1]) / (n // size)
    group = np.empty(len(first), dtype=np.int64)
    group[first] = np.arange(len(first)) // size
    labels = np.sort(group[second[:n]].reshape(-1, size), axis=1)
    same = labels[:, 1:] == labels[:, :-1]
    met = np.zeros_like(labels, dtype=bool)
    met[:, 1:] |= same
    met[:, :-1] |= same
    return identical, float(met.mean())


@pytest.mark.parametrize("n_pairs", [80_273, 1_000_000, 1_024_000])
def test_minibatches_and_megabatches_change_every_epoch_as_by_chance(n_pairs):
    """The former order (blocks of one mega-batch, permuted) kept 68-100% of the minibatches of
    these sizes identical from one epoch to the next; a fresh permutation keeps none, and a
    pair meets its former minibatch mates about as often as under a uniform permutation."""
    epochs = [
        EpochOrder(n_pairs, seed=0, epoch=e, window_pairs=CAP * BATCH).indices(0, n_pairs)
        for e in (0, 1)
    ]
    rng = np.random.default_rng(1)
    chance = [rng.permutation(n_pairs) for _ in (0, 1)]
    for size in (BATCH, CAP * BATCH):
        identical, met = _repeats(*epochs, size)
        _, met_by_chance = _repeats(*chance, size)
        assert identical == 0
        assert met <= met_by_chance + 0.02, (size, met, met_by_chance)


class ListReader:
    """A PairReader over Python lists, counting its reads: pair ``i`` has source ids
    ``[i] * (1 + i % 5)`` and target ids ``[-i]``."""

    def __init__(self, n: int):
        self.n, self.reads = n, 0

    def __len__(self) -> int:
        return self.n

    def read(self, start: int, stop: int) -> PairBatch:
        self.reads += 1
        lengths = np.array([1 + i % 5 for i in range(start, stop)])
        src = np.repeat(np.arange(start, stop), lengths)
        tgt = -np.arange(start, stop)
        return PairBatch(
            src, np.concatenate([[0], np.cumsum(lengths)]), tgt, np.arange(stop - start + 1)
        )


def test_stream_reads_the_order_window_by_window():
    n, window, block = 5000, 640, 64
    reader = ListReader(n)
    order = EpochOrder(n, seed=3, epoch=2, window_pairs=window, block=block)
    stream = EpochStream(reader, order, max_pieces=3)
    cfg = TrainConfig(batch_size=32, megabatch_size=window // 32, anneal=2)
    windows = list(megabatch_windows(len(stream), 0, 0, cfg))
    got = [stream.read(start, stop) for start, stop, _ in windows]
    expected = order.indices(0, windows[-1][1])
    src_firsts = np.concatenate([s.ids[s.offsets[:-1]].numpy() for s, _ in got])
    assert np.array_equal(src_firsts, expected)
    assert np.array_equal(np.concatenate([t.ids.numpy() for _, t in got]), -expected)
    lengths = np.concatenate([np.diff(s.offsets.numpy()) for s, _ in got])
    assert np.array_equal(lengths, np.minimum(1 + expected % 5, 3))  # max_pieces
    # each window read once (its contiguous runs), though many mega-batches share it
    runs = sum(len(order.window_runs(k)) for k in range(order.n_windows))
    assert reader.reads == runs
