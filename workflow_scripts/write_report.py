"""Rule report: results/report.md from the outputs of every other rule."""

from psp.report import write_report
from psp.workflow_runtime import setup

setup(snakemake)
write_report(
    snakemake.output.report,
    evals=snakemake.input.evals,
    floors=snakemake.input.floors,
    peers=snakemake.input.peers,
    train_logs=snakemake.input.train_logs,
    mined=snakemake.input.mined,
    bucc=snakemake.input.bucc,
)
