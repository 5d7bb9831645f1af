"""The mining-at-scale benchmark runs the workflow's jobs end to end (here at a toy size)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_mine_scale.py"


def test_benchmark_grid_recall_and_planted_pairs(tmp_path):
    cmd = [sys.executable, str(BENCH), "--n", "6000", "--dim", "64", "--shard-rows", "3000"]
    cmd += ["--nprobe", "8", "--recall-queries", "500", "--ratio-rows", "1024", "--cores", "1"]
    out = subprocess.run([*cmd, "--dir", str(tmp_path)], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["shards_per_side"] == 2 and report["search"] == "ivf"
    (run,) = report["runs"]
    assert set(run["stages_s"]) == {"train_index", "index_shard", "knn_shard_pair", "score_mined"}
    assert all(rss > 0 for rss in run["peak_rss_mib"].values())
    assert min(run["recall_at_k"].values()) > 0.9
    assert run["planted_mined"] > 0.5
    assert 0 < report["exact_path_vs_matmul"]["ratio"]
    assert list(tmp_path.iterdir()) == []  # the work folder is removed


def test_benchmark_gives_each_job_its_rules_threads():
    """The benchmark schedules jobs as Snakemake would, so its thread counts are the rules'."""
    import importlib.util
    import re

    spec = importlib.util.spec_from_file_location("bench_mine_scale", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rules = (BENCH.parents[1] / "rules" / "mine.smk").read_text()
    for name, threads in bench.RULE_THREADS.items():
        body = rules.split(f"rule {name}:", 1)[1].split("\nrule ", 1)[0]
        assert int(re.search(r"threads: (\d+)", body).group(1)) == threads, name
    assert "threads: get_knn_threads" in rules.split("rule knn_shard_pair:", 1)[1]
    assert [bench.job_threads("knn_shard_pair", 2, shards) for shards in (1, 4)] == [2, 1]
    assert bench.job_threads("train_index", 1, 4) == 1
