"""What one worker of a parallel training does (:mod:`psp.train.parallel`): train whole
mega-batches of the epoch on a table it shares with the other workers of its node.

Started as ``python -c "from psp.train.worker import main; main()" RESULTS_FD`` by the
coordinator (not ``-m``, which would import this module twice), which passes it the table
and Adam's two moments as memory file descriptors (``memfd``: mapped by every worker, gone when
the last one exits) and talks to it in JSON lines: the set-up and then one task
``{"epoch": e, "windows": [[start, stop, first_step], ...]}`` per segment on stdin, one
:class:`WindowResult` per mega-batch back on ``RESULTS_FD``. A separate interpreter, not a
``multiprocessing`` child, so that nothing of the caller's ``__main__`` (a workflow script) runs
again in it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import math
import os
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from psp.train.config import TrainConfig
from psp.train.data import EpochOrder, EpochStream, prefetched
from psp.train.optim import LazyAdam
from psp.train.step import PhaseTimes, train_megabatch


@dataclass(frozen=True)
class Window:
    """One mega-batch of an epoch: stream positions ``[start, stop)``, the run's step count
    before it."""

    start: int
    stop: int
    first_step: int

    def steps(self, batch_size: int) -> int:
        return math.ceil((self.stop - self.start) / batch_size)


@dataclass
class WindowResult:
    """What a worker reports of a mega-batch it trained: its steps' losses and pairs, and the
    seconds of each phase (:class:`PhaseTimes`)."""

    start: int
    losses: list[float]
    pairs: list[int]
    times: dict[str, float]


def window_generator(
    cfg: TrainConfig, epoch: int, start: int, device: torch.device
) -> torch.Generator | None:
    """The random stream of dropout and token dropout for one mega-batch, from
    ``(seed, epoch, start)`` alone, so it does not depend on which worker trains the mega-batch
    (``None`` without either)."""
    if cfg.dropout <= 0 and cfg.token_dropout <= 0:
        return None
    seed = int(np.random.SeedSequence([cfg.seed, epoch, start]).generate_state(1)[0])
    return torch.Generator(device=device).manual_seed(seed)


def train_windows(
    optimizer: LazyAdam,
    reader,
    *,
    cfg: TrainConfig,
    epoch: int,
    windows: list[Window],
) -> Iterator[WindowResult]:
    """Train ``windows`` of ``epoch`` on ``optimizer``'s table, one after the other (the next
    one read in the background), yielding each one's result."""
    table = optimizer.weight
    window_pairs = cfg.megabatch_size * cfg.batch_size
    order = EpochOrder(len(reader), seed=cfg.seed, epoch=epoch, window_pairs=window_pairs)
    stream = EpochStream(reader, order, cfg.max_pieces)
    with prefetched(stream.read, [(w.start, w.stop) for w in windows]) as batches:
        for window in windows:
            times, losses, pairs = PhaseTimes(), [], []
            waited = time.perf_counter()
            src, tgt = next(batches)
            times.data = time.perf_counter() - waited
            train_megabatch(
                table,
                optimizer,
                src.to(table.device),
                tgt.to(table.device),
                cfg=cfg,
                first_step=window.first_step,
                generator=window_generator(cfg, epoch, window.start, table.device),
                times=times,
                on_step=lambda loss, n: (losses.append(loss), pairs.append(n)),
            )
            yield WindowResult(window.start, losses, pairs, times.to_dict())


def shared_tensor(fd: int, shape: tuple[int, int]) -> torch.Tensor:
    """The float32 tensor of ``shape`` in the memory file ``fd``, mapped shared (writes are
    every mapper's)."""
    return torch.from_file(
        f"/proc/self/fd/{fd}", shared=True, size=math.prod(shape), dtype=torch.float32
    ).view(*shape)


def _die_with_parent() -> None:
    """Have the kernel kill this process when the coordinator dies (Linux ``PR_SET_PDEATHSIG``),
    so a coordinator killed outright leaves no worker behind."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def main() -> None:
    """The worker process: set up from the first line of stdin, then train each task's
    mega-batches until stdin closes."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator stops its workers
    results = os.fdopen(int(sys.argv[1]), "w", buffering=1)
    tasks = sys.stdin
    setup = json.loads(tasks.readline())
    try:
        from psp.data.pairs_store import PairReader

        torch.set_num_threads(setup["threads"])
        cfg = TrainConfig.from_dict(setup["cfg"])
        shape = tuple(setup["shape"])
        table, exp_avg, exp_avg_sq = (shared_tensor(fd, shape) for fd in setup["fds"])
        optimizer = LazyAdam(table, lr=cfg.lr, moments=(exp_avg, exp_avg_sq))
        with PairReader(setup["h5"]) as reader:
            results.write(json.dumps({"ready": True}) + "\n")
            for line in tasks:
                task = json.loads(line)
                windows = [Window(*w) for w in task["windows"]]
                for result in train_windows(
                    optimizer, reader, cfg=cfg, epoch=task["epoch"], windows=windows
                ):
                    results.write(json.dumps(dataclasses.asdict(result)) + "\n")
    except BaseException:
        results.write(json.dumps({"error": traceback.format_exc()}) + "\n")
        raise SystemExit(1) from None
