"""The one encoder timer: what it counts, what it leaves out, and the harness's report of it."""

from __future__ import annotations

import math
import subprocess
import sys
import time

import numpy as np

from psp.evaluate.timing import TimedEmbedder, Timing, time_embed, timed


class SleepyEmbedder:
    """Sleeps 2 ms per call (wall time without CPU) and burns CPU per sentence; records calls."""

    def __init__(self):
        self.calls: list[int] = []

    def embed(self, sentences: list[str]) -> np.ndarray:
        self.calls.append(len(sentences))
        time.sleep(0.002)
        total = 0
        for _ in range(2000 * len(sentences)):
            total += 1
        return np.full((len(sentences), 3), total, dtype=np.float32)


def test_timed_measures_wall_and_process_cpu():
    _, wall, cpu = timed(lambda: time.sleep(0.05))
    assert wall >= 0.05 and cpu < 0.04  # sleeping costs no CPU
    result, wall, cpu = timed(lambda: sum(range(3_000_000)))
    assert result == sum(range(3_000_000)) and cpu > 0 and wall > 0


def test_time_embed_leaves_the_warmup_out():
    embedder = SleepyEmbedder()
    sentences = [f"s{i}" for i in range(40)]
    vectors, timing = time_embed(embedder, sentences, warmup=8)
    assert embedder.calls == [8, 40] and vectors.shape == (40, 3)
    assert timing.sentences == 40 and timing.wall_s >= 0.002 and timing.cpu_s > 0
    assert timing.sentences_per_s == 40 / timing.wall_s


def test_timed_embedder_adds_up_its_calls():
    timed_embedder = TimedEmbedder(SleepyEmbedder())
    assert math.isnan(timed_embedder.report()["sentences_per_s"])
    for n in (3, 5):
        assert timed_embedder.embed([f"x{i}" for i in range(n)]).shape == (n, 3)
    timing = timed_embedder.timing
    assert timing.sentences == 8 and timing.wall_s >= 0.004
    report = timed_embedder.report()
    assert report["sentences"] == 8 and report["seconds"] == round(timing.wall_s, 4)
    assert report["sentences_per_s"] == 8 / timing.wall_s and report["threads"] >= 1
    assert Timing(1, 2.0, 3.0) + Timing(2, 0.5, 1.0) == Timing(3, 2.5, 4.0)


def test_peak_rss_grows_with_a_touched_allocation():
    """In a fresh interpreter (this one's high-water mark may lie above anything allocated
    here): 64 MiB written raise the peak by about that much."""
    code = (
        "import numpy as np; from psp.evaluate.timing import peak_rss_mib; before = peak_rss_mib(); "
        "block = np.ones(64 * 2**20 // 8); print(before, peak_rss_mib(), block.sum() > 0)"
    )
    before, after, touched = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert 60 <= float(after) - float(before) < 80 and touched == "True"
