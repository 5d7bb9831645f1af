"""Rule filter_pairs: a model's corpora → clean pairs + filter_stats.json."""

from pathlib import Path

from psp import workflow_config as wc
from psp.prepare import prepare_pairs
from psp.workflow_runtime import setup

setup(snakemake)
job = snakemake.params.job
prepare_pairs(
    wc.staged_root(snakemake.input, wc.refs_files(Path(), job["corpora"], job["languages"])),
    model_type=job["type"],
    corpora=job["corpora"],
    languages=job["languages"],
    filters=job["filters"],
    out_pairs=snakemake.output.pairs,
    out_stats=snakemake.output.stats,
    max_pairs=job["max_pairs"],
    workers=snakemake.threads,
)
