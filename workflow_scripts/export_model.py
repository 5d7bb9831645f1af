"""Rules export_sentence_transformers / export_model2vec: a model directory in a library's layout."""

from pathlib import Path

from psp.export import export_model
from psp.workflow.runtime import setup

setup(snakemake)
export_model(
    Path(snakemake.input.config).parent,
    Path(snakemake.output.card).parent,
    library=snakemake.params.library,
)
