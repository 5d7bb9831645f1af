"""Rule train_model: HDF5 pairs → model directory; resumes from the last checkpoint after a crash.

``resources.tasks`` > 1 trains as that many ranks, started by ``resources.mpi`` (``srun``) or as
local processes (psp.workflow.train_job)."""

from pathlib import Path

from psp.train import TrainConfig
from psp.workflow.runtime import setup
from psp.workflow.train_job import TrainJob, launch_train_job

setup(snakemake)
job = snakemake.params.job
cfg = TrainConfig.from_dict(
    job["train"] | {"threads": snakemake.threads},
    f"config models.{snakemake.wildcards.model}.train",
)
bitext_dev = job["bitext_dev"]
launch_train_job(
    TrainJob(
        cfg=cfg.to_dict(),
        h5=snakemake.input.h5,
        spm=snakemake.input.spm,
        model_dir=str(Path(snakemake.output.config).parent),
        # train() writes train_log.tsv, learning_curve.png (both outputs) and checkpoints/ (not
        # one, see rules/train.smk) into one folder.
        work_dir=str(Path(snakemake.output.log_tsv).parent),
        stsb=list(snakemake.input.dev),
        bitext_dev=bitext_dev and bitext_dev | {"files": list(snakemake.input.bitext_dev)},
    ),
    tasks=int(getattr(snakemake.resources, "tasks", 1)),
    launcher=getattr(snakemake.resources, "mpi", None),
)
