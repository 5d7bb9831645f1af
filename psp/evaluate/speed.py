"""Embedding speed, measured on the evaluation's own ``embed`` calls.

Wrapping the embedder costs nothing extra: the sentences the STS evaluators embed anyway are
the benchmark, so every model in a report is timed on the same ~25k English sentences, with
the thread count recorded beside the rate (the rate means little without it).
"""

from __future__ import annotations

import os
import time

import numpy as np


def thread_count() -> int:
    """Threads the embedders' math runs on: torch's intra-op pool when torch is loaded."""
    try:
        import torch
    except ImportError:
        return os.cpu_count() or 1
    return torch.get_num_threads()


class TimedEmbedder:
    """Forward ``embed`` to ``embedder`` while adding up sentences and wall-clock seconds."""

    def __init__(self, embedder):
        self.embedder = embedder
        self.sentences = 0
        self.seconds = 0.0

    def embed(self, sentences: list[str]) -> np.ndarray:
        start = time.perf_counter()
        vectors = self.embedder.embed(sentences)
        self.seconds += time.perf_counter() - start
        self.sentences += len(sentences)
        return vectors

    def report(self) -> dict[str, float]:
        """``sentences``, ``seconds``, ``sentences_per_s``, ``threads``, ``cpu_count``."""
        return {
            "sentences": self.sentences,
            "seconds": round(self.seconds, 4),
            "sentences_per_s": self.sentences / self.seconds if self.seconds > 0 else float("nan"),
            "threads": thread_count(),
            "cpu_count": os.cpu_count() or 1,
        }
