"""Rule mine_text: one side's monolingual text → normalised, deduplicated, filtered sentences."""

from psp.prepare import prepare_sentences
from psp.workflow_runtime import setup

setup(snakemake)
job = snakemake.params.job
prepare_sentences(
    job["data_root"],
    job["refs"],
    job["lang"],
    job["filters"],
    snakemake.output.text,
    snakemake.output.stats,
    workers=snakemake.threads,
)
