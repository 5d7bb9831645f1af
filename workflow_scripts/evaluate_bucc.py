"""Rule evaluate_bucc: threshold tuned on the dev task, precision/recall/F1 on the test task."""

from pathlib import Path

import psp
from psp.mine import MineConfig
from psp.mine.bucc import BuccData, run_bucc
from psp.workflow_runtime import setup

setup(snakemake)
job = snakemake.params.job
data = job["data"] | {
    "src_distractors": tuple(job["data"]["src_distractors"]),
    "tgt_distractors": tuple(job["data"]["tgt_distractors"]),
}
run_bucc(
    psp.load(job["model"]),
    job["data_root"],
    Path(snakemake.output.metrics).parent,
    cfg=MineConfig.from_dict(job["mine"]),
    data=BuccData(**data),
)
