"""The pair-filter benchmark evaluates every setting on a BUCC-style task (here a small one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_pair_filters.py"


def test_benchmark_rows_per_setting(tiny_model, shared_data, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    (models / "es-en").symlink_to(tiny_model)
    cmd = [sys.executable, str(BENCH), "--mirror", str(shared_data), "--models", str(models)]
    cmd += ["--pairs", "es-en", "--max-distractors", "300", "--max-scores", "2.0"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rows = {row["setting"]: row for row in map(json.loads, out.stdout.splitlines())}
    assert {"none", "default", "dedup", "pair_langid", "max_score 2.0", "data_stage_langid"} <= set(
        rows
    )
    none, default = rows["none"], rows["default"]
    assert (
        none["test"]["removed"] == {} and none["test"]["f1"] == none["test"]["without_filters_f1"]
    )
    assert default["test"]["without_filters_f1"] == none["test"]["f1"]
    rule = rows["data_stage_langid"]["test"]
    assert rule["gold"] + rule["other"] <= rule["gold_in_output"] + rule["other_in_output"]
