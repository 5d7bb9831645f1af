"""Rule speed: Table 5, the speed of every trained model and peer beside its STS average."""

from pathlib import Path

from psp.evaluate.speed import encoder_table, measure_speed, speed_sentences
from psp.report.figures import plot_speed_quality
from psp.workflow.runtime import setup

setup(snakemake)
# Model directories and the evaluation root are where the (possibly staged) input files are.
models = [str(Path(config).parent) for config in snakemake.input.model_configs]
eval_root = Path(snakemake.input.evals[0]).parents[1]
rows = measure_speed(
    encoder_table(models, snakemake.params.peers, eval_root),
    speed_sentences(snakemake.input.news, snakemake.params.sentences),
    snakemake.threads,
    snakemake.output.csv,
)
plot_speed_quality(rows, snakemake.output.plot)
