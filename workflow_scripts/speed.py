"""Rule speed: Table 5, the speed of every trained model and peer beside its STS average."""

from psp.evaluate.speed import encoder_table, measure_speed, speed_sentences
from psp.workflow_runtime import setup

setup(snakemake)
measure_speed(
    encoder_table(snakemake.params.models, snakemake.params.peers, snakemake.params.eval_root),
    speed_sentences(snakemake.input.news, snakemake.params.sentences),
    snakemake.threads,
    snakemake.output.csv,
    snakemake.output.plot,
)
