"""Rule train_index: one IVF quantizer per pair, trained on a sample across all shards of both sides."""

from psp.mine import IndexConfig, load_plan, train_index, uses_ivf
from psp.mine.index import write_no_index
from psp.workflow.runtime import setup

setup(snakemake)
cfg = IndexConfig.from_dict(snakemake.params.index)
src, tgt = load_plan(snakemake.input.src_plan), load_plan(snakemake.input.tgt_plan)
if uses_ivf(src.n_lines, tgt.n_lines, cfg):
    train_index(snakemake.input.src, snakemake.input.tgt, cfg, snakemake.output.index)
else:
    write_no_index(snakemake.output.index)
