"""Rule score_mined (the reduce step): merge shard-pair kNN, margin-score, write mined pairs."""

from psp.mine import MineConfig, load_plan, reduce_parts, write_mined
from psp.workflow_runtime import setup

setup(snakemake)
cfg = MineConfig.from_dict(snakemake.params.mine)
src_plan, tgt_plan = load_plan(snakemake.input.src_plan), load_plan(snakemake.input.tgt_plan)
fwd, bwd = reduce_parts(snakemake.input.knn, cfg.k, src_plan, tgt_plan)
write_mined(
    snakemake.input.src_text,
    snakemake.input.tgt_text,
    fwd,
    bwd,
    cfg,
    snakemake.output.pairs,
    snakemake.output.stats,
    snakemake.output.histogram,
)
