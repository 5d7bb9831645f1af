"""Data-parallel training: several workers on one node, and several nodes, training one model.

Every worker (:mod:`psp.train.worker`) is a process with its own HDF5 reader. It takes whole
mega-batches of the epoch, mines their hardest negatives with the table as it finds it and
steps through them, updating the rows it uses in place in a table and Adam moments that all
workers of the node share (shared memory, no locks: Hogwild, the way fastText and word2vec
train their sparse embeddings; a row two workers update at the same instant may lose part of
one update, which sparse gradients make rare). ``docs/training.md`` has the measurements that
chose this scheme.

The epoch's mega-batches are those of the sequential trainer (:func:`megabatch_windows`: the
same order, sizes and step numbers), dealt out in rounds, one to each worker of every rank.
The run meets at synchronisation points: the first round end after every ``checkpoint_every``
steps per worker, the epoch's end and ``max_steps``. There the workers stand still, the ranks
add up their updates (:class:`psp.train.distributed.UpdateMerge`), rank 0 logs the steps that
ran, checkpoints and evaluates, and the next segment of rounds is dealt out. So every pair is
seen once per epoch, a checkpoint holds whole mega-batches, and a run resumes from one as the
sequential trainer does. What is not deterministic is the interleaving of the workers' updates,
hence the parameters, to within that noise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from multiprocessing.connection import wait

import torch

from psp.train import distributed
from psp.train.config import TrainConfig, megabatch_size_at
from psp.train.data import megabatch_windows
from psp.train.loop import Trainer
from psp.train.step import PhaseTimes
from psp.train.worker import Window, WindowResult, shared_tensor, train_windows

#: How often the coordinator looks at its workers while it waits for their results.
POLL_S = 1.0
#: The worker process's entry point (``-c``, so its module is imported once).
WORKER_MAIN = "from psp.train.worker import main; main()"


def segments(
    windows: list[Window], group: int, cfg: TrainConfig
) -> Iterator[tuple[list[Window], bool]]:
    """Cut the rest of an epoch into segments of whole rounds of ``group`` mega-batches, each
    ending at a synchronisation point; yields ``(segment, ends_in_a_checkpoint)``.

    A segment ends after the round that crosses a multiple of ``checkpoint_every * group``
    steps (with one worker: the sequential trainer's checkpoints), that reaches ``max_steps``
    (the run stops there), or that ends the epoch (whose own checkpoint follows).
    """
    every = cfg.checkpoint_every * group
    segment: list[Window] = []
    for r in range(0, len(windows), group):
        rounds = windows[r : r + group]
        segment += rounds
        end = rounds[-1].first_step + rounds[-1].steps(cfg.batch_size)
        last = r + group >= len(windows)
        stop = cfg.max_steps is not None and end >= cfg.max_steps
        crossed = end // every > segment[0].first_step // every
        if last or stop or crossed:
            yield segment, crossed and not (last or stop)
            segment = []
        if stop:
            return


class SharedTensors:
    """The table and Adam's moments in memory files (``memfd``) that worker processes map:
    the memory goes when the last process holding it exits, whatever kills it."""

    def __init__(self, tensors: list[torch.Tensor]):
        self.shape = tuple(tensors[0].shape)
        self.fds, self.tensors = [], []
        for name, tensor in zip(("table", "exp_avg", "exp_avg_sq"), tensors):
            fd = os.memfd_create(f"psp-train-{name}")
            os.ftruncate(fd, tensor.numel() * tensor.element_size())
            shared = shared_tensor(fd, self.shape)
            shared.copy_(tensor)
            self.fds.append(fd)
            self.tensors.append(shared)

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def log_fd() -> int:
    """Where a worker writes what it prints: this process's ``sys.stderr`` (a workflow job's
    log), else file descriptor 2."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2


class WorkerProcess:
    """One worker: its process, the pipe it reads tasks from and the one it reports on (read
    unbuffered, so that waiting on several workers' pipes never misses a buffered line)."""

    def __init__(self, worker: int, shared: SharedTensors, setup: dict, threads: int):
        self.results, results_w = os.pipe()
        env = os.environ | {var: str(threads) for var in THREAD_VARIABLES}
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER_MAIN, str(results_w)],
            stdin=subprocess.PIPE,
            stdout=log_fd(),
            stderr=log_fd(),
            pass_fds=(*shared.fds, results_w),
            env=env,
            text=True,
        )
        os.close(results_w)
        self.worker, self.pending = worker, b""
        self.send(setup | {"worker": worker, "threads": threads, "fds": shared.fds})

    def fileno(self) -> int:
        return self.results

    def send(self, message: dict) -> None:
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def receive(self) -> list[dict]:
        """The messages that have come, at least one (blocks until one does); a
        ``RuntimeError`` with the worker's traceback if it failed, or if it died."""
        while b"\n" not in self.pending:
            chunk = os.read(self.results, 1 << 16)
            if not chunk:
                self.process.wait()
                raise RuntimeError(
                    f"training worker {self.worker} died (exit code {self.process.returncode})"
                )
            self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        messages = [json.loads(line) for line in lines]
        for message in messages:
            if "error" in message:
                raise RuntimeError(f"training worker {self.worker} failed:\n{message['error']}")
        return messages

    def stop(self) -> None:
        if not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.results)


#: Thread-pool variables a worker starts with, before its libraries read them.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class ParallelTrainer(Trainer):
    """:class:`Trainer` over ``workers`` on this node, as one of ``world``'s ranks (or the only
    one). Several workers are processes sharing the table (CPU only); one worker is this
    process, on its device (a rank per GPU). Rank 0 writes every output."""

    def __init__(self, cfg: TrainConfig, h5_path, spm_path, *, workers: int, world=None, **keys):
        if world is not None and not world.is_main:
            keys["evaluator"] = None
        super().__init__(cfg, h5_path, spm_path, **keys)
        if workers > 1 and self.device.type != "cpu":
            raise ValueError(
                f"train.workers: several workers share a table on the CPU, not on {self.device}"
            )
        self.world, self.n_workers = world, workers
        self.group = workers * (world.size if world else 1)
        self.first_worker = workers * (world.rank if world else 0)
        distributed.broadcast_tensors([self.table], world)
        self.merge = None
        self.shared, self.workers = None, []
        if workers > 1:
            self.start_workers()

    @property
    def is_main(self) -> bool:
        return self.world is None or self.world.is_main

    def start_workers(self) -> None:
        """Move the table and moments into memory files and start the worker processes on them
        (returns once every worker has opened the data)."""
        optimizer = self.optimizer
        self.shared = SharedTensors([self.table, optimizer.exp_avg, optimizer.exp_avg_sq])
        self.table, optimizer.exp_avg, optimizer.exp_avg_sq = self.shared.tensors
        self.model.embedding.weight.data = optimizer.weight = self.table
        threads = max(1, (self.cfg.threads or torch.get_num_threads()) // self.n_workers)
        setup = {"h5": str(self.h5_path), "cfg": self.cfg.to_dict(), "shape": self.shared.shape}
        self.workers = [
            WorkerProcess(self.first_worker + k, self.shared, setup, threads)
            for k in range(self.n_workers)
        ]
        for worker in self.workers:
            worker.receive()

    def resume(self) -> None:
        """Rank 0 reads the checkpoint; every rank takes its state and tensors."""
        if self.is_main:
            super().resume()
        self.state = distributed.broadcast_object(self.state, self.world)
        tensors = [self.table, self.optimizer.exp_avg, self.optimizer.exp_avg_sq]
        distributed.broadcast_tensors(tensors, self.world)
        self.optimizer.steps = self.state.step

    def run(self) -> None:
        if self.world is not None:
            self.merge = distributed.UpdateMerge(
                self.table, [self.optimizer.exp_avg, self.optimizer.exp_avg_sq]
            )
        super().run()

    def train_epoch(self) -> None:
        cfg, state = self.cfg, self.state
        windows = [
            Window(*w) for w in megabatch_windows(len(self.reader), state.pos, state.step, cfg)
        ]
        t0, first = time.perf_counter(), state.pos
        for segment, ends_in_checkpoint in segments(windows, self.group, cfg):
            self.train_segment(segment)
            self.stopped = cfg.max_steps is not None and state.step >= cfg.max_steps
            if self.stopped:
                break
            if ends_in_checkpoint:
                self.checkpoint()
        if not self.stopped:
            self.end_epoch(pairs_per_s=(len(self.reader) - first) / (time.perf_counter() - t0))
        self.checkpoint()

    def train_segment(self, segment: list[Window]) -> None:
        """Deal the segment's mega-batches out, wait for all of them, merge the ranks' updates
        and log the steps in the order of the schedule."""
        t0 = time.perf_counter()
        shares = [
            [w for i, w in enumerate(segment) if i % self.group == self.first_worker + k]
            for k in range(self.n_workers)
        ]
        local = self.train_shares(shares)
        if self.merge is not None:
            self.merge()
        results = [r for part in distributed.gather_objects(local, self.world) for r in part]
        wall = time.perf_counter() - t0
        self.bar.update(sum(sum(r.pairs) for r in results) - sum(sum(r.pairs) for r in local))
        self.step_rate = (segment[-1].stop - segment[0].start) / wall
        self.state.elapsed += wall
        by_start = {r.start: r for r in results}
        for window in segment:
            result = by_start[window.start]
            self.times.add(PhaseTimes(**result.times))
            self.megabatch = megabatch_size_at(
                window.first_step, self.cfg.anneal, self.cfg.megabatch_size
            )
            for loss, pairs in zip(result.losses, result.pairs):
                self.record_step(loss, pairs)
            self.state.pos = window.stop

    def train_shares(self, shares: list[list[Window]]) -> list[WindowResult]:
        """Train this node's shares of a segment (one per worker), return their results."""
        epoch = self.state.epoch
        if not self.workers:
            results = []
            for result in train_windows(
                self.optimizer, self.reader, cfg=self.cfg, epoch=epoch, windows=shares[0]
            ):
                results.append(result)
                self.bar.update(sum(result.pairs))
            return results
        expected = 0
        for worker, windows in zip(self.workers, shares):
            if windows:
                worker.send({"epoch": epoch, "windows": [list(vars(w).values()) for w in windows]})
                expected += len(windows)
        return self.collect(expected)

    def collect(self, expected: int) -> list[WindowResult]:
        """The workers' results of a segment, as they arrive; a worker that fails or dies stops
        the run with its error."""
        results = []
        while len(results) < expected:
            for worker in wait(self.workers, timeout=POLL_S):
                for message in worker.receive():
                    results.append(WindowResult(**message))
                    self.bar.update(sum(results[-1].pairs))
            for worker in self.workers:
                if worker.process.poll() is not None:
                    worker.receive()  # raises, with the worker's error if it left one
        return results

    def checkpoint(self) -> None:
        if self.is_main:
            super().checkpoint()

    def write_log(self, final: bool = False) -> None:
        if self.is_main:
            super().write_log(final)

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        if self.shared is not None:
            self.shared.close()
        super().close()


def worker_count(cfg: TrainConfig) -> int:
    """``train.workers``, by default the job's threads on the CPU (one when they are not set)
    and one on a GPU."""
    if cfg.workers is not None:
        return cfg.workers
    return (cfg.threads or 1) if cfg.device == "cpu" else 1
