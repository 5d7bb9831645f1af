"""Rule train_sentencepiece: one unigram model over both (normalised) sides of the clean pairs."""

from psp.data.spm_training import spm_settings, train_spm_from_pairs
from psp.workflow.runtime import setup

setup(snakemake)
train_spm_from_pairs(
    snakemake.input.pairs,
    snakemake.output.model,
    **spm_settings(snakemake.params.spm, snakemake.params.languages),
    num_threads=snakemake.threads,
)
