"""One way to time an encoder: wall-clock and process CPU seconds of its ``embed`` calls.

Every speed figure of the project goes through :func:`timed`: the evaluation harness times the
``embed`` calls its STS evaluators make anyway (:class:`TimedEmbedder`, the speed in
``metrics.json``), Table 5 times one embedding of its news sentences in a fresh pinned process
(:mod:`psp.evaluate.worker`, :func:`time_embed`), and ``benchmarks/bench_embed.py`` times ours
against the original recipe. An encoder is anything with ``embed(list[str]) -> np.ndarray``
(:class:`~psp.evaluate.base.Embedder`): our models, sentence-transformers, model2vec and
static peers alike.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from psp.evaluate.base import Embedder

T = TypeVar("T")


@dataclass(frozen=True)
class Timing:
    """Sentences embedded and the wall-clock and process CPU (user + system) seconds it took."""

    sentences: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0

    def __add__(self, other: Timing) -> Timing:
        return Timing(
            self.sentences + other.sentences, self.wall_s + other.wall_s, self.cpu_s + other.cpu_s
        )

    @property
    def sentences_per_s(self) -> float:
        """Sentences per wall-clock second (NaN before any time was spent)."""
        return self.sentences / self.wall_s if self.wall_s > 0 else float("nan")


def timed(call: Callable[[], T]) -> tuple[T, float, float]:
    """``call()``'s result, its wall-clock seconds and this process's CPU seconds over it.

    On a machine shared with other jobs the CPU seconds are the better estimate of what one
    dedicated core does; the wall seconds are what a user waits.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def time_embed(
    embedder: Embedder, sentences: list[str], *, warmup: int = 0
) -> tuple[np.ndarray, Timing]:
    """Embed ``sentences`` and time it; the first ``warmup`` sentences are embedded untimed
    first (lazy allocations, thread pools and caches are not the encoder's steady speed)."""
    if warmup:
        embedder.embed(sentences[:warmup])
    vectors, wall, cpu = timed(lambda: embedder.embed(sentences))
    return vectors, Timing(len(sentences), wall, cpu)


class TimedEmbedder:
    """Forward ``embed`` to ``embedder``, adding up the :class:`Timing` of every call."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self.timing = Timing()

    def embed(self, sentences: list[str]) -> np.ndarray:
        vectors, timing = time_embed(self.embedder, sentences)
        self.timing += timing
        return vectors

    def report(self) -> dict[str, float]:
        """``sentences``, ``seconds``, ``sentences_per_s``, ``threads``, ``cpu_count``: the rate
        means little without the threads it ran on."""
        return {
            "sentences": self.timing.sentences,
            "seconds": round(self.timing.wall_s, 4),
            "sentences_per_s": self.timing.sentences_per_s,
            "threads": thread_count(),
            "cpu_count": os.cpu_count() or 1,
        }


def thread_count() -> int:
    """Threads the embedders' math runs on: torch's intra-op pool when torch is loaded."""
    try:
        import torch
    except ImportError:
        return os.cpu_count() or 1
    return torch.get_num_threads()


def rss_mib() -> float:
    """This process's resident set now, in MiB (``/proc/self/statm``)."""
    resident = int(Path("/proc/self/statm").read_text().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib() -> float:
    """This process's peak resident set in MiB, from Linux's ``VmHWM``.

    ``VmHWM`` belongs to the process image since its ``exec``; ``ru_maxrss`` would carry over the
    high-water mark of the (large) parent it was forked from.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM line in /proc/self/status: peak RSS is measured on Linux only")
