"""Rule index_shard: one shard's rows assigned to their nearest lists of the pair's quantizer."""

from pathlib import Path

from psp.mine import fill_index
from psp.mine.index import write_no_index
from psp.workflow.runtime import setup

setup(snakemake)
if Path(snakemake.input.trained).stat().st_size == 0:  # the pair is searched exactly
    write_no_index(snakemake.output.lists)
else:
    fill_index(
        snakemake.input.trained,
        snakemake.input.emb,
        snakemake.output.lists,
        nprobe=snakemake.params.nprobe,
    )
