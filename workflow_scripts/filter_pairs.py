"""Rule filter_pairs: a model's corpora → clean pairs + filter_stats.json."""

from pathlib import Path

from psp.data.prepare import prepare_pairs
from psp.workflow import jobs
from psp.workflow.runtime import setup

setup(snakemake)
job = snakemake.params.job
prepare_pairs(
    jobs.staged_root(snakemake.input, jobs.refs_files(Path(), job["corpora"], job["languages"])),
    model_type=job["type"],
    corpora=job["corpora"],
    languages=job["languages"],
    filters=job["filters"],
    out_pairs=snakemake.output.pairs,
    out_stats=snakemake.output.stats,
    max_pairs=job["max_pairs"],
    workers=snakemake.threads,
)
