"""Rule knn_shard_pair: top-k neighbours both ways between one source and one target shard."""

from psp.mine import IndexConfig, count_lines, knn_shard_pair, shard_bounds
from psp.workflow_runtime import setup

setup(snakemake)
mine = snakemake.params.mine
n = snakemake.params.shards
src_offset = shard_bounds(count_lines(snakemake.input.src_text), n)[
    int(snakemake.wildcards.qshard)
][0]
tgt_offset = shard_bounds(count_lines(snakemake.input.tgt_text), n)[
    int(snakemake.wildcards.dshard)
][0]
knn_shard_pair(
    snakemake.input.src,
    snakemake.input.tgt,
    src_offset,
    tgt_offset,
    mine["k"],
    snakemake.output.knn,
    index=IndexConfig.from_dict(mine["index"]),
)
