"""Training with several workers and several ranks, for real: the schedule they share, learning
as one worker does, resuming after the coordinator is killed, two ranks of torch.distributed
(gloo) against one, and the merge of the ranks' updates."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from psp.train import TrainConfig, megabatch_windows, train
from psp.train.distributed import World, world_from_env
from psp.train.parallel import segments
from psp.train.worker import Window

from .faults import PSP, temporaries
from .test_train_run import held_out_quality, tiny, tiny_config  # noqa: F401 (tiny: fixture)


def parallel_config(**overrides) -> TrainConfig:
    return tiny_config(**{"threads": 2, "workers": 2, "epochs": 4, **overrides})


@pytest.mark.parametrize("group", [1, 2, 3])
def test_segments_deal_every_mega_batch_once_in_whole_rounds(group):
    cfg = TrainConfig(batch_size=32, megabatch_size=4, anneal=5, checkpoint_every=10)
    windows = [Window(*w) for w in megabatch_windows(3000, 0, 0, cfg)]
    cut = list(segments(windows, group, cfg))
    assert [w for segment, _ in cut for w in segment] == windows
    assert all(len(segment) % group == 0 for segment, _ in cut[:-1])
    assert cut[-1][1] is False  # the epoch's end checkpoints anyway
    for segment, checkpoint in cut[:-1]:
        end = segment[-1].first_step + segment[-1].steps(cfg.batch_size)
        every = cfg.checkpoint_every * group
        assert checkpoint == (end // every > segment[0].first_step // every)
    # one worker: a checkpoint where the sequential trainer takes one
    if group == 1:
        assert sum(c for _, c in cut) == sum(
            (w.first_step + w.steps(32)) // 10 > w.first_step // 10 for w in windows[:-1]
        )


def test_segments_stop_at_the_round_that_reaches_max_steps():
    cfg = TrainConfig(batch_size=32, megabatch_size=4, anneal=5, max_steps=40)
    windows = [Window(*w) for w in megabatch_windows(3000, 0, 0, cfg)]
    cut = [w for segment, _ in segments(windows, 2, cfg) for w in segment]
    end = cut[-1].first_step + cut[-1].steps(32)
    assert end >= 40 and cut[-3].first_step + cut[-3].steps(32) < 40


def test_two_workers_learn_as_one_does(tiny, tmp_path):  # noqa: F811
    from psp.model.torch_model import PSPModel, load

    init = PSPModel.from_spm(tiny["spm"], dim=32, seed=0)
    before = held_out_quality(init, tiny["held"])
    quality, logs = {}, {}
    for workers in (1, 2):
        cfg = parallel_config(workers=workers, threads=workers)
        out = train(
            cfg,
            tiny["h5"],
            tiny["spm"],
            model_dir=tmp_path / f"m{workers}",
            work_dir=tmp_path / f"w{workers}",
        )
        quality[workers] = held_out_quality(load(out), tiny["held"])
        logs[workers] = (tmp_path / f"w{workers}" / "train_log.tsv").read_text().splitlines()
    assert quality[2]["accuracy"] > before["accuracy"] + 0.05, (before, quality)
    assert abs(quality[2]["accuracy"] - quality[1]["accuracy"]) < 0.03, quality
    assert abs(quality[2]["loss"] - quality[1]["loss"]) < 0.1 * quality[1]["loss"], quality
    # the same schedule: the same steps logged at the same counts, every epoch's row
    assert [line.split("\t")[:3] for line in logs[2]] == [line.split("\t")[:3] for line in logs[1]]
    header = logs[2][0].split("\t")
    epoch_row = dict(zip(header, logs[2][-1].split("\t")))
    assert float(epoch_row["mine_s"]) > 0 and float(epoch_row["steps_s"]) > 0
    assert (tmp_path / "w2" / "learning_curve.png").stat().st_size > 1000


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def train_args(tiny, model: Path, work: Path, *, workers: int = 2) -> list[str]:  # noqa: F811
    """``psp train`` on the tiny data, 6 short epochs, ``workers`` workers on as many threads."""
    settings = ["--dim", "32", "--batch-size", "32", "--megabatch-size", "4", "--anneal", "5"]
    settings += ["--epochs", "6", "--lr", "0.01", "--checkpoint-every", "10", "--no-eval"]
    settings += ["--workers", str(workers), "--threads", str(workers)]
    paths = ["--h5", tiny["h5"], "--spm", tiny["spm"], "--model-dir", model, "--work-dir", work]
    return [str(a) for a in [PSP, "train", *paths, *settings]]


def run_training(argv: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def test_killed_parallel_training_takes_its_workers_along_and_resumes(tiny, tmp_path):  # noqa: F811
    from psp.model.torch_model import load

    run_training(train_args(tiny, tmp_path / "a", tmp_path / "wa"))
    state = tmp_path / "wb" / "checkpoints" / "state.json"
    run_b = train_args(tiny, tmp_path / "b", tmp_path / "wb")
    killed = subprocess.Popen(run_b, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not state.exists() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    workers = _children(killed.pid)
    assert killed.poll() is None, "training ended before its first checkpoint could be killed"
    assert len(workers) == 2
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    deadline = time.monotonic() + 10
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, workers)), "a worker outlived its coordinator"
    step = json.loads(state.read_text())["state"]["step"]

    resumed = run_training([*run_b, "--resume"])
    assert f"resuming from step {step}" in resumed.stderr
    provenance = [
        json.loads((tmp_path / r / "config.json").read_text())["provenance"] for r in "ab"
    ]
    assert 0 < step < provenance[1]["steps"] == provenance[0]["steps"]
    a, b = (held_out_quality(load(tmp_path / r), tiny["held"]) for r in "ab")
    assert abs(a["accuracy"] - b["accuracy"]) < 0.03, (a, b)
    assert temporaries(tmp_path / "wb") == []


def run_ranks(script: str, *args: str, size: int = 2) -> str:
    """``script ARGS`` as ``size`` ranks on this node, started by torchrun; their stdout."""
    torchrun = Path(sys.executable).parent / "torchrun"
    argv = [str(torchrun), "--standalone", f"--nproc-per-node={size}", script, *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_two_ranks_train_the_files_and_the_quality_of_one(tiny, tmp_path):  # noqa: F811
    """Two ranks of ``psp train`` started by torchrun (gloo, one worker each): rank 0 writes
    what a one-rank run writes, rank 1 nothing, and the model learns as well."""
    from psp.model.torch_model import load

    run_training(train_args(tiny, tmp_path / "one", tmp_path / "w1", workers=1))
    run_ranks(*train_args(tiny, tmp_path / "two", tmp_path / "w2", workers=1))
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(
        p.name for p in (tmp_path / "one").iterdir()
    )
    assert sorted(p.name for p in (tmp_path / "w2").iterdir()) == sorted(
        p.name for p in (tmp_path / "w1").iterdir()
    )
    provenance = [
        json.loads((tmp_path / r / "config.json").read_text())["provenance"] for r in ("one", "two")
    ]
    assert provenance[0]["steps"] == provenance[1]["steps"]
    a, b = (held_out_quality(load(tmp_path / r), tiny["held"]) for r in ("one", "two"))
    assert abs(a["accuracy"] - b["accuracy"]) < 0.03, (a, b)


MERGE = textwrap.dedent(
    """
    import json, sys, torch
    from psp.train import distributed
    world = distributed.world_from_env()
    distributed.start(world, torch.device("cpu"))
    table, m, v = torch.zeros(4, 2), torch.zeros(4, 2), torch.ones(4, 2)
    merge = distributed.UpdateMerge(table, [m, v])
    rank = world.rank
    table[rank] += 1.0          # row 0: rank 0 only, row 1: rank 1 only
    table[2] += rank + 1.0      # row 2: both ranks
    m[rank] = 2.0 + rank
    m[2] = 1.0 + 3 * rank
    merge()
    # one write of the whole line: the ranks share one pipe, and print() writes the newline apart
    sys.stdout.write(json.dumps([table.tolist(), m.tolist(), v.tolist()]) + "\\n")
    sys.stdout.flush()
    distributed.stop()
    """
)


def test_update_merge_adds_the_ranks_changes_and_averages_their_moments(tmp_path):
    script = tmp_path / "merge.py"
    script.write_text(MERGE)
    first, second = run_ranks(str(script)).splitlines()
    assert first == second  # every rank holds the merged tensors
    table, m, v = json.loads(first)
    assert table == [[1, 1], [1, 1], [3, 3], [0, 0]]  # every change applied
    assert m == [[2, 2], [3, 3], [2.5, 2.5], [0, 0]]  # one user keeps its moment; two: the mean
    assert v == [[1, 1]] * 4  # unchanged


def test_world_comes_from_torchrun_or_srun_and_one_task_is_no_world():
    torchrun = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "n1"}
    assert world_from_env(torchrun | {"MASTER_PORT": "1234"}) == World(1, 4, 1, "n1", 1234)
    srun = {"SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "3", "SLURM_LOCALID": "0"}
    srun |= {"SLURM_STEP_NODELIST": "n[1-3]", "SLURM_JOB_ID": "77", "MASTER_ADDR": "n1"}
    assert world_from_env(srun) == World(2, 3, 0, "n1", 29577)
    # a batch script in a 3-task allocation, not started by srun: one rank
    assert world_from_env({"SLURM_NTASKS": "3", "SLURM_PROCID": "0"}) is None
    assert world_from_env({"RANK": "0", "WORLD_SIZE": "1"}) is None


def test_a_workflow_job_of_two_tasks_trains_as_two_ranks(tiny, shared_data, tmp_path):  # noqa: F811
    """``launch_train_job`` with ``tasks: 2`` and no launcher: two local ranks from the job
    file, rank 0 selecting epochs on STS-B dev; the files and the steps of a one-task job."""
    from psp.workflow import jobs
    from psp.workflow.train_job import TrainJob, launch_train_job

    stsb = [str(p) for p in jobs.mirror_files(shared_data, "sts/stsb")]
    for tasks in (1, 2):
        cfg = parallel_config(workers=1, threads=1, select_best=True, epochs=3)
        job = TrainJob(
            cfg=cfg.to_dict(),
            h5=str(tiny["h5"]),
            spm=str(tiny["spm"]),
            model_dir=str(tmp_path / f"m{tasks}"),
            work_dir=str(tmp_path / f"w{tasks}"),
            stsb=stsb,
        )
        launch_train_job(job, tasks=tasks)
    assert (tmp_path / "w2" / "train_job.json").exists()
    files = [sorted(p.name for p in (tmp_path / f"m{t}").iterdir()) for t in (1, 2)]
    assert files[0] == files[1]
    provenance = [
        json.loads((tmp_path / f"m{t}" / "config.json").read_text())["provenance"] for t in (1, 2)
    ]
    assert provenance[0]["steps"] == provenance[1]["steps"]
    assert provenance[1]["best_epoch"] is not None  # rank 0 evaluated every epoch
    log = (tmp_path / "w2" / "train_log.tsv").read_text()
    assert "stsb_dev_spearman" in log.splitlines()[0]
