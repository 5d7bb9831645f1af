"""Rule train_model: HDF5 pairs → model directory; resumes from the last checkpoint after a crash."""

from pathlib import Path

from psp import workflow_config as wc
from psp.evaluate import StsbEvaluator, TatoebaEvaluator
from psp.evaluate.base import SelectingEvaluator
from psp.mine.bucc import BuccData, dev_gold_pairs
from psp.train import TrainConfig, has_checkpoint, train
from psp.workflow_runtime import setup

setup(snakemake)
job = snakemake.params.job
cfg = TrainConfig.from_dict(
    job["train"] | {"threads": snakemake.threads},
    f"config models.{snakemake.wildcards.model}.train",
)
# train() writes train_log.tsv, learning_curve.png (both outputs) and checkpoints/ (not one,
# see rules/train.smk) into one folder.
work_dir = Path(snakemake.output.log_tsv).parent


def epoch_evaluator():
    """STS-B dev for every model; a bitext model with a BUCC-style task is selected on
    retrieval of that task's dev gold (the Tatoeba measure on held-out bitext) instead."""
    stsb = StsbEvaluator.from_dir(
        wc.staged_root(snakemake.input.dev, wc.mirror_files(Path(), "sts/stsb")), splits=("dev",)
    )
    if job["bitext_dev"] is None:
        return stsb
    data = BuccData(**job["bitext_dev"]["data"])
    relative = wc.refs_files(Path(), job["bitext_dev"]["refs"], [data.src_lang, data.tgt_lang])
    src, tgt = dev_gold_pairs(wc.staged_root(snakemake.input.bitext_dev, relative), data)
    retrieval = TatoebaEvaluator({data.src_lang: (src, tgt)}, name="bitext_dev")
    return SelectingEvaluator(retrieval, stsb)


train(
    cfg,
    snakemake.input.h5,
    snakemake.input.spm,
    model_dir=Path(snakemake.output.config).parent,
    work_dir=work_dir,
    resume=has_checkpoint(work_dir, cfg, snakemake.input.h5),
    evaluator=epoch_evaluator() if cfg.select_best else None,
)
