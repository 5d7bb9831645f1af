"""Rule knn_shard_pair: top-k neighbours both ways between one source and one target shard."""

from psp.mine import knn_shard_pair, load_lists, load_plan
from psp.workflow.runtime import setup

setup(snakemake)
knn_shard_pair(
    src_npy=snakemake.input.src,
    tgt_npy=snakemake.input.tgt,
    src_plan=load_plan(snakemake.input.src_plan),
    tgt_plan=load_plan(snakemake.input.tgt_plan),
    src_shard=int(snakemake.wildcards.src_shard),
    tgt_shard=int(snakemake.wildcards.tgt_shard),
    k=snakemake.params.k,
    out_npz=snakemake.output.knn,
    src_lists=load_lists(snakemake.input.src_lists),
    tgt_lists=load_lists(snakemake.input.tgt_lists),
)
