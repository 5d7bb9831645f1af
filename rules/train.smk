# HDF5 pairs → P-SP model directory (docs/design.md §4-5). A rerun after a crash resumes from the
# last checkpoint in results/train/{model}/checkpoints/.
#
# The checkpoints are the one thing a job writes that is not an output, by design: Snakemake
# deletes a failed job's outputs, and the checkpoints must outlive the crash. The script puts
# them beside train_log.tsv, wherever the job writes that: in results/train/{model}/ on a
# shared file system; under a storage plugin, in the job's local copy of that folder, which is
# never uploaded. So a rerun that finds that local copy (same machine) resumes, while one on
# a fresh node, e.g. a new Kubernetes pod, trains again from step 0.


rule train_model:
    input:
        unpack(get_train_inputs),
    output:
        **model_files("results/models/{model}"),
        log_tsv="results/train/{model}/train_log.tsv",
        curve=report(
            "results/train/{model}/learning_curve.png",
            caption="../report/learning_curve.rst",
            category="Training",
            labels={"model": "{model}"},
        ),
    log:
        "results/logs/train_model/{model}.log",
    benchmark:
        "results/benchmarks/train_model/{model}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
    params:
        job=lambda wildcards: train_job(
            wildcards.model, MODELS[wildcards.model].get("train", {})
        ),
    script:
        "../workflow_scripts/train_model.py"


rule init_untrained:
    input:
        spm="results/spm/{model}.model",
    output:
        **model_files("results/models/untrained/{model}"),
    log:
        "results/logs/init_untrained/{model}.log",
    conda:
        "../envs/psp.yaml"
    params:
        train=lambda wildcards: MODELS[wildcards.model].get("train", {}),
        languages=lambda wildcards: MODELS[wildcards.model]["languages"],
    script:
        "../workflow_scripts/init_untrained.py"
