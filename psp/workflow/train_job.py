"""A training job of the workflow (rule ``train_model``): its per-epoch evaluator, and its run
as one process or as several ranks.

The job is plain data (:class:`TrainJob`), so that a job of several tasks can hand it to each of
its ranks as a JSON file: ``resources.tasks`` > 1 starts that many ranks of
``torch.distributed`` with the job's launcher (``resources.mpi``, e.g. ``srun`` inside the
job's SLURM allocation) or, without one, as local processes; each rank runs
:func:`run_train_job`. ``docs/training.md`` (Several nodes) says how a profile asks for it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from psp.io import atomic_open
from psp.workflow import jobs

#: How each rank of a many-task job starts: the job file is its one argument.
RANK_MAIN = (
    "import sys; from psp.workflow.train_job import run_train_file; run_train_file(sys.argv[1])"
)


@dataclass(frozen=True)
class TrainJob:
    """Everything a training job needs, as paths and plain values.

    ``stsb`` are the job's STS-B dev input files and ``bitext_dev`` (a model selected on
    retrieval of its BUCC-style task's dev gold) ``{"data": BuccData fields, "refs": [...],
    "files": [...]}``: the roots are found from the files, which may be a storage plugin's
    local copies (:func:`psp.workflow.jobs.staged_root`).
    """

    cfg: dict
    h5: str
    spm: str
    model_dir: str
    work_dir: str
    stsb: list[str]
    bitext_dev: dict | None = None


def epoch_evaluator(job: TrainJob):
    """STS-B dev for every model; a bitext model with a BUCC-style task is selected on retrieval
    of that task's dev gold (the Tatoeba measure on held-out bitext) instead."""
    from psp.evaluate import StsbEvaluator, TatoebaEvaluator
    from psp.evaluate.base import SelectingEvaluator
    from psp.mine.bucc import BuccData, dev_gold_pairs

    stsb_root = jobs.staged_root(job.stsb, jobs.mirror_files(Path(), "sts/stsb"))
    stsb = StsbEvaluator.from_dir(stsb_root, splits=("dev",))
    if job.bitext_dev is None:
        return stsb
    data = BuccData(**job.bitext_dev["data"])
    relative = jobs.refs_files(Path(), job.bitext_dev["refs"], [data.src_lang, data.tgt_lang])
    src, tgt = dev_gold_pairs(jobs.staged_root(job.bitext_dev["files"], relative), data)
    retrieval = TatoebaEvaluator({data.src_lang: (src, tgt)}, name="bitext_dev")
    return SelectingEvaluator(retrieval, stsb)


def run_train_job(job: TrainJob) -> None:
    """Train the job in this process (one rank of it, under a launcher): rank 0 decides whether
    its checkpoint resumes, and writes every output."""
    from psp.train import TrainConfig, has_checkpoint, train
    from psp.train.distributed import world_from_env

    cfg = TrainConfig.from_dict(job.cfg, "train_model job")
    world = world_from_env()
    main = world is None or world.is_main
    train(
        cfg,
        job.h5,
        job.spm,
        model_dir=job.model_dir,
        work_dir=job.work_dir,
        resume=main and has_checkpoint(job.work_dir, cfg, job.h5),
        evaluator=epoch_evaluator(job) if cfg.select_best and main else None,
    )


def run_train_file(path: str) -> None:
    """:func:`run_train_job` of the job written to ``path`` (a rank's entry point)."""
    from psp.io import exit_on_sigterm

    exit_on_sigterm()
    run_train_job(TrainJob(**json.loads(Path(path).read_text(encoding="utf-8"))))


def launch_train_job(job: TrainJob, *, tasks: int = 1, launcher: str | None = None) -> None:
    """Run the job as ``tasks`` ranks: in this process for one; otherwise through
    ``launcher`` (``srun``: ``--ntasks`` and ``--cpus-per-task`` are added, the job's threads
    per task) or, without one, as local processes on a free port of 127.0.0.1."""
    if tasks <= 1:
        run_train_job(job)
        return
    path = Path(job.work_dir) / "train_job.json"
    with atomic_open(path) as fh:
        json.dump(dataclasses.asdict(job), fh, indent=1)
    command = [sys.executable, "-c", RANK_MAIN, str(path)]
    if launcher:
        threads = job.cfg.get("threads") or 1
        prefix = [*shlex.split(launcher), f"--ntasks={tasks}", f"--cpus-per-task={threads}"]
        _wait([subprocess.Popen([*prefix, "--kill-on-bad-exit=1", *command])])
        return
    port = _free_port()
    ranks = [
        subprocess.Popen(
            command,
            env=os.environ
            | {"RANK": str(rank), "WORLD_SIZE": str(tasks), "LOCAL_RANK": str(rank)}
            | {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)},
        )
        for rank in range(tasks)
    ]
    _wait(ranks)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(processes: list[subprocess.Popen], poll_s: float = 0.5) -> None:
    """Wait for every rank; as soon as one fails, stop the others (they would wait for it at
    their next synchronisation) and raise."""
    try:
        while any(process.poll() is None for process in processes):
            if any(process.poll() for process in processes):
                break
            time.sleep(poll_s)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
    codes = [process.returncode for process in processes]
    if any(codes):
        raise RuntimeError(f"training ranks ended with exit codes {codes}")
