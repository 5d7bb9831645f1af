"""The JSON Lines mining benchmark runs both of its ``psp mine`` runs (here at a toy size)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_mine_jsonl.py"


def test_benchmark_mines_jsonl_and_text_alike(tiny_model, shared_data, tmp_path):
    work = tmp_path / "work"
    cmd = [sys.executable, str(BENCH), "--mirror", str(shared_data), "--model", str(tiny_model)]
    cmd += ["--lines", "3000", "--tgt-lines", "200", "--work", str(work)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["same_pairs"] is True and report["mine"]["text"]["pairs"] > 0
    for stage in ("mine", "prepare_source_side"):
        for kind in ("text", "jsonl"):
            assert report[stage][kind]["peak_rss_mib"] > 0 and report[stage][kind]["wall_s"] > 0
        assert set(report["ratio_jsonl_to_text"][stage]) == {"wall_s", "peak_rss_mib"}
    assert not work.exists()
