"""Rule train_sentencepiece: one unigram model over both (lowercased) sides of the clean pairs."""

from psp.spm import train_spm_from_pairs
from psp.workflow_runtime import setup

setup(snakemake)
spm = snakemake.params.spm
train_spm_from_pairs(
    snakemake.input.pairs,
    snakemake.output.model,
    vocab_size=spm.get("vocab_size", 8000),
    character_coverage=spm.get("character_coverage", 0.995),
    input_sentence_size=spm.get("input_sentence_size", 2_000_000),
    num_threads=snakemake.threads,
)
