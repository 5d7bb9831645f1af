"""The SLURM profile on a real cluster: the mining DAG through sbatch, checked against a local run.

tests/cluster/run_slurm_test.sh (`make test-cluster`) starts a one-node SLURM cluster and sets
PSP_SLURM_CLUSTER; anywhere else this file skips.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from ..workflow.conftest import REPO, run_snakemake
from ..workflow.test_run import tiny_config

pytestmark = pytest.mark.skipif(
    not os.environ.get("PSP_SLURM_CLUSTER"),
    reason="needs the cluster that tests/cluster/run_slurm_test.sh starts",
)

MINING_RULES = {"mine_text", "embed_shard", "knn_shard_pair", "score_mined"}
# One thread per job, so jobs share the node; one rule with two, to check that SLURM is asked
# for as many CPUs as the rule has threads.
THREADS = {"score_mined": 2}


def node_sized(config, workdir) -> list[str]:
    """Options that fit profiles/slurm to a node of a few CPUs and GiB, and to a cluster
    without an accounting database.

    The profile sizes jobs for real nodes (16 threads, up to 64 GB); here rules get the threads
    above and 2 GB. Job states come from squeue instead of sacct, first asked after 1 s instead
    of 40, as the jobs take seconds.
    """
    rules = run_snakemake(["--list-rules", "--configfile", str(config)], workdir).stdout.split()
    return [
        "--set-threads",
        *(f"{rule}={THREADS.get(rule, 1)}" for rule in rules),
        "--set-resources",
        *(f"{rule}:mem_mb=2000" for rule in rules),
        "--slurm-status-command=squeue",
        "--slurm-init-seconds-before-status-checks=1",
    ]


def slurm_jobs(run_id: str) -> list[tuple[str, str, int]]:
    """(rule, state, CPUs) of every job of a run, as slurmctld records them (the plugin names
    jobs after the run and writes the rule into the job comment)."""
    out = subprocess.run(
        [
            "squeue",
            "--states=all",
            "--noheader",
            "--name",
            run_id,
            "--Format=State:20,NumCPUs:10,Comment:200",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    jobs = []
    for line in out.splitlines():
        state, cpus, comment = line.split(maxsplit=2)
        rule = re.match(r"rule_(\w+?)(?:_wildcards_|$)", comment.strip()).group(1)
        jobs.append((rule, state, int(cpus)))
    return jobs


def mined_lines(workdir) -> list[str]:
    with gzip.open(workdir / "results/mine/es-en/es-en.tsv.gz", "rt") as handle:
        return handle.read().splitlines()


def test_mining_through_slurm_matches_local(mirror_slice, tmp_path):
    spec = tiny_config(mirror_slice)
    # The tiny model's margins stay below the default threshold; keep most candidates instead,
    # so the comparison at the end covers many lines. One shard per side: each SLURM job costs
    # three Python start-ups and a status poll, and the 2x2 grid would double the run time.
    spec["mining"]["es-en"]["threshold"] = 0.9
    spec["mining"]["es-en"]["shards"] = 1
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(spec))
    local, cluster = tmp_path / "local", tmp_path / "slurm"
    local.mkdir()
    profile = REPO / "profiles/slurm"
    mine = ["mine_es_en", "--configfile", str(config)]
    with ThreadPoolExecutor(2) as pool:
        sizing = pool.submit(node_sized, config, tmp_path)
        # The tiny model is trained once, locally; both work dirs mine with it.
        run_snakemake(["train_es_en", "--cores", "2", "--configfile", str(config)], local)
        shutil.copytree(local, cluster, symlinks=True)
        # The SLURM run mostly waits (job start-up, status polls): the local run goes alongside.
        on_slurm = pool.submit(
            run_snakemake, [*mine, "--profile", str(profile), *sizing.result()], cluster
        )
        run_snakemake([*mine, "--cores", "2"], local)
        proc = on_slurm.result()

    # Every job Snakemake ran went through sbatch and finished there; local rules print
    # "localrule", so "rule" blocks are exactly the jobs handed to the executor.
    run_id = re.search(r"SLURM run ID: (\S+)", proc.stderr).group(1)
    handed_over = Counter(re.findall(r"^rule (\w+):$", proc.stderr, flags=re.MULTILINE))
    jobs = slurm_jobs(run_id)
    assert MINING_RULES <= set(handed_over), handed_over
    assert "train_model" not in handed_over, "the copied model should be up to date"
    assert Counter(rule for rule, _, _ in jobs) == handed_over
    assert {state for _, state, _ in jobs} == {"COMPLETED"}, jobs
    assert all(cpus == THREADS.get(rule, 1) for rule, _, cpus in jobs), jobs

    mined = mined_lines(cluster)
    assert mined, "nothing mined: the comparison below would be empty"
    assert mined == mined_lines(local)


def last_epoch(workdir) -> dict:
    """The last epoch row of the es-en training log."""
    with open(workdir / "results/train/es-en/train_log.tsv", encoding="utf-8") as handle:
        rows = [line.rstrip("\n").split("\t") for line in handle]
    return [dict(zip(rows[0], row)) for row in rows[1:] if row[0] == "epoch"][-1]


def test_training_as_two_slurm_tasks_matches_one_local_task(mirror_slice, tmp_path):
    """train_model asked for two tasks through the profile (``tasks``, ``mpi: srun``): one
    SLURM job of two CPUs whose script starts two ranks with srun; the model has the files, the
    steps and (within noise) the dev retrieval error of one local task on the same data."""
    spec = tiny_config(mirror_slice)
    spec["models"]["es-en"]["train"] |= {"epochs": 4, "workers": 1}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(spec))
    local, cluster = tmp_path / "local", tmp_path / "slurm"
    local.mkdir()
    run_snakemake(["prepare_es_en", "--cores", "2", "--configfile", str(config)], local)
    shutil.copytree(local, cluster, symlinks=True)
    sized = node_sized(config, tmp_path)
    at = sized.index("--set-resources") + 1
    sized[at:at] = ["train_model:tasks=2", "train_model:mpi='srun'"]
    profile = ["--profile", str(REPO / "profiles/slurm"), *sized]
    proc = run_snakemake(["train_es_en", "--configfile", str(config), *profile], cluster)
    run_snakemake(
        [
            "train_es_en",
            "--cores",
            "2",
            "--set-threads",
            "train_model=1",
            "--configfile",
            str(config),
        ],
        local,
    )
    run_id = re.search(r"SLURM run ID: (\S+)", proc.stderr).group(1)
    jobs = slurm_jobs(run_id)
    assert [(rule, state, cpus) for rule, state, cpus in jobs] == [("train_model", "COMPLETED", 2)]
    models = [
        sorted(p.name for p in (w / "results/models/es-en").iterdir()) for w in (local, cluster)
    ]
    assert models[0] == models[1]
    one, two = last_epoch(local), last_epoch(cluster)
    assert one["step"] == two["step"]
    errors = [float(row["bitext_dev_avg_error"]) for row in (one, two)]
    assert abs(errors[0] - errors[1]) < 5, errors  # % of dev gold pairs not retrieved
