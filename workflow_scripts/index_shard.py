"""Rule index_shard: one shard's rows added to the pair's trained IVF index, with their lists."""

from pathlib import Path

from psp.mine import fill_index
from psp.mine.index import write_no_index
from psp.workflow_runtime import setup

setup(snakemake)
if Path(snakemake.input.trained).stat().st_size == 0:  # the pair is searched exactly
    write_no_index(snakemake.output.index, snakemake.output.lists)
else:
    fill_index(
        snakemake.input.trained,
        snakemake.input.emb,
        snakemake.output.index,
        snakemake.output.lists,
        snakemake.params.nprobe,
    )
