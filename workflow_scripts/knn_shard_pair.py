"""Rule knn_shard_pair: top-k neighbours both ways between one source and one target shard."""

from psp.mine import knn_shard_pair, load_plan
from psp.mine.index import indexed_shard
from psp.workflow_runtime import setup

setup(snakemake)
knn_shard_pair(
    snakemake.input.src,
    snakemake.input.tgt,
    load_plan(snakemake.input.src_plan),
    load_plan(snakemake.input.tgt_plan),
    int(snakemake.wildcards.src_shard),
    int(snakemake.wildcards.tgt_shard),
    snakemake.params.k,
    snakemake.output.knn,
    src_index=indexed_shard(snakemake.input.src_index, snakemake.input.src_lists),
    tgt_index=indexed_shard(snakemake.input.tgt_index, snakemake.input.tgt_lists),
)
