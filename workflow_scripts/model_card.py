"""Rules model_card / untrained_model_card: README.md (Hugging Face model card) in a model directory."""

from pathlib import Path

from psp.export.model_card import write_model_card
from psp.workflow.runtime import setup

setup(snakemake)
write_model_card(
    Path(snakemake.output.card).parent,
    corpora=snakemake.params.corpora,
    eval_dir=Path(snakemake.input.metrics).parent,
    untrained=snakemake.params.untrained,
)
