"""Rule train_model: HDF5 pairs → model directory; resumes from the last checkpoint after a crash."""

from pathlib import Path

from psp import workflow_config as wc
from psp.evaluate import StsbEvaluator
from psp.train import TrainConfig, has_checkpoint, train
from psp.workflow_runtime import setup

setup(snakemake)
cfg = TrainConfig.from_dict(
    snakemake.params.train | {"threads": snakemake.threads},
    f"config models.{snakemake.wildcards.model}.train",
)
# train() writes train_log.tsv, learning_curve.png (both outputs) and checkpoints/ (not one,
# see rules/train.smk) into one folder.
work_dir = Path(snakemake.output.log_tsv).parent
evaluator = (
    StsbEvaluator.from_dir(
        wc.staged_root(snakemake.input.dev, wc.mirror_files(Path(), "sts/stsb")), splits=("dev",)
    )
    if cfg.select_best
    else None
)
train(
    cfg,
    snakemake.input.h5,
    snakemake.input.spm,
    model_dir=Path(snakemake.output.config).parent,
    work_dir=work_dir,
    resume=has_checkpoint(work_dir, cfg, snakemake.input.h5),
    evaluator=evaluator,
)
