"""Rule mine_text: one side's monolingual text → filtered sentences as a sharded text + its plan."""

from psp.prepare import prepare_mining_side
from psp.workflow_runtime import setup

setup(snakemake)
job = snakemake.params.job
prepare_mining_side(
    snakemake.input,
    job["lang"],
    job["filters"],
    snakemake.params.shards,
    snakemake.output.text,
    snakemake.output.plan,
    snakemake.output.stats,
    workers=snakemake.threads,
)
