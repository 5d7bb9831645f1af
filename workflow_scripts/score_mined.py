"""Rule score_mined (the reduce step): merge shard-pair kNN, margin-score, write mined pairs."""

from psp.mine import load_plan, reduce_parts, write_mined
from psp.mine.bucc import config_with_threshold
from psp.workflow.runtime import setup

setup(snakemake)
cfg, source = config_with_threshold(snakemake.params.mine, snakemake.input.get("bucc"))
src_plan, tgt_plan = load_plan(snakemake.input.src_plan), load_plan(snakemake.input.tgt_plan)
fwd, bwd = reduce_parts(snakemake.input.knn, cfg.k, src_plan, tgt_plan)
write_mined(
    snakemake.input.src_text,
    snakemake.input.tgt_text,
    fwd=fwd,
    bwd=bwd,
    cfg=cfg,
    out_path=snakemake.output.pairs,
    stats_json=snakemake.output.stats,
    histogram_png=snakemake.output.histogram,
    threshold_source=source,
    languages=tuple(snakemake.wildcards.pair.split("-")),
)
