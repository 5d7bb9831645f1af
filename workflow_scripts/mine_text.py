"""Rule mine_text: one side's monolingual text → filtered sentences as a sharded text + its plan."""

from psp.mine.plan import prepare_mining_side
from psp.workflow.runtime import setup

setup(snakemake)
job = snakemake.params.job
prepare_mining_side(
    snakemake.input,
    lang=job["lang"],
    filters=job["filters"],
    n_shards=snakemake.params.shards,
    out_text=snakemake.output.text,
    out_plan=snakemake.output.plan,
    out_stats=snakemake.output.stats,
    workers=snakemake.threads,
    text_field=job["text_field"],
)
