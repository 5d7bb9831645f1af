# The paper's tables for all models beside their untrained floors and the peers, with training
# curves and mining; the same tables as the results page (docs/results.md is its copy from the
# last full run) and every score as one tidy CSV.


rule report:
    input:
        **get_report_inputs(),
    output:
        report="results/report.md",
        page="results/results.md",
        results="results/tables/results.csv",
    log:
        "results/logs/report/report.log",
    localrule: True
    conda:
        "../envs/psp.yaml"
    params:
        languages={model: entry["languages"] for model, entry in MODELS.items()},
        corpora={model: entry["corpora"] for model, entry in MODELS.items()},
        loss_comparison=get_compare_params(),
    script:
        "../workflow_scripts/write_report.py"
