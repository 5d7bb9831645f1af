"""Rule embed_shard: one shard of a side's sentences → L2-normalised embeddings (.npy)."""

from pathlib import Path

import psp
from psp.mine import check_model_languages, embed_shard, load_plan
from psp.workflow.runtime import setup

setup(snakemake)
model_dir = Path(snakemake.input.config).parent
model = psp.load(model_dir)
check_model_languages(model, *snakemake.wildcards.pair.split("-"), model_dir)
embed_shard(
    model,
    snakemake.input.text,
    load_plan(snakemake.input.plan),
    shard=int(snakemake.wildcards.shard),
    out_npy=snakemake.output.emb,
    float16=snakemake.params.float16,
)
