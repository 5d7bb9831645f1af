# All models, their untrained floors and peers side by side, with training curves and mining.


rule report:
    input:
        **get_report_inputs(),
    output:
        report="results/report.md",
    log:
        "results/logs/report/report.log",
    localrule: True
    conda:
        "../envs/psp.yaml"
    script:
        "../workflow_scripts/write_report.py"
