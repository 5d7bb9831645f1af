"""Rule distill_model2vec: a model2vec static peer distilled from a sentence-transformers model."""

from pathlib import Path

from psp.evaluate.peers import distill_model2vec
from psp.workflow.runtime import setup

setup(snakemake)
distill_model2vec(snakemake.wildcards.source, Path(snakemake.output.card).parent)
