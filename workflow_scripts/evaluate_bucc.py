"""Rule evaluate_bucc: threshold tuned on the dev task, precision/recall/F1 on the test task."""

from pathlib import Path

import psp
from psp.mine import MineConfig
from psp.mine.bucc import BuccData, run_bucc
from psp.workflow import jobs
from psp.workflow.runtime import setup

setup(snakemake)
entry = snakemake.params.job["entry"]
pair = snakemake.wildcards.bucc
data_root = jobs.staged_root(
    snakemake.input.data, jobs.refs_files(Path(), jobs.bucc_refs(entry), pair.split("-"))
)
run_bucc(
    psp.load(Path(snakemake.input.config).parent),
    data_root,
    Path(snakemake.output.metrics).parent,
    cfg=MineConfig.from_dict(snakemake.params.job["mine"]),
    data=BuccData(**jobs.bucc_data(entry, pair)),
)
