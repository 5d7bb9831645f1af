"""Rule report: results/report.md, results.md and tables/results.csv from every other rule's outputs."""

from psp.report import ReportInputs, write_report
from psp.report.compare_losses import trainings
from psp.workflow.runtime import setup

setup(snakemake)
inputs = snakemake.input
write_report(
    snakemake.output.report,
    ReportInputs(
        evals=inputs.evals,
        languages=snakemake.params.languages,
        floors=inputs.floors,
        peers=inputs.peers,
        train_logs=inputs.train_logs,
        mined=inputs.mined,
        bucc=inputs.bucc,
        data_stats=inputs.data_stats,
        spm_stats=inputs.spm_stats,
        corpora=snakemake.params.corpora,
        speed=inputs.speed,
        speed_plot=inputs.speed_plot,
        loss_comparison=trainings(
            snakemake.params.loss_comparison,
            inputs.compare_evals,
            inputs.compare_logs,
            inputs.compare_bucc,
        ),
    ),
    page_path=snakemake.output.page,
    results_path=snakemake.output.results,
)
