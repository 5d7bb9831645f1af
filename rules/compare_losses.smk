# Training objectives compared (opt-in, docs/training.md): each model of compare_losses.models
# trained a second time on the same HDF5 pairs for the same epochs with compare_losses.train's
# keys on top of its own, evaluated and BUCC-tested by the same rules as the first, both set
# side by side in results/report.md. Outputs mirror the first training's under
# results/compare_losses/.


use rule train_model as train_compare_losses with:
    output:
        **model_files("results/compare_losses/models/{model}"),
        log_tsv="results/compare_losses/train/{model}/train_log.tsv",
        curve="results/compare_losses/train/{model}/learning_curve.png",
    log:
        "results/logs/train_compare_losses/{model}.log",
    benchmark:
        "results/benchmarks/train_compare_losses/{model}.tsv"
    params:
        job=lambda wildcards: train_job(
            wildcards.model, get_compare_train(wildcards.model)
        ),


use rule evaluate_model as evaluate_compare_losses with:
    input:
        unpack(
            lambda wildcards: model_files(
                f"results/compare_losses/models/{wildcards.model}"
            )
        ),
        data=get_eval_data_inputs,
    output:
        **eval_tables("results/compare_losses/eval/{model}"),
        tables="results/compare_losses/eval/{model}/tables.md",
        metrics="results/compare_losses/eval/{model}/metrics.json",
    log:
        "results/logs/evaluate_compare_losses/{model}.log",
    benchmark:
        "results/benchmarks/evaluate_compare_losses/{model}.tsv"
    params:
        eval_sets=get_eval_sets,


use rule evaluate_bucc as evaluate_bucc_compare_losses with:
    input:
        unpack(get_compare_bucc_inputs),
    output:
        metrics="results/compare_losses/bucc/{bucc}/bucc.json",
        curve="results/compare_losses/bucc/{bucc}/pr_curve.png",
        scores="results/compare_losses/bucc/{bucc}/score_distributions.png",
    log:
        "results/logs/evaluate_bucc_compare_losses/{bucc}.log",
    benchmark:
        "results/benchmarks/evaluate_bucc_compare_losses/{bucc}.tsv"


rule compare_losses:
    input:
        get_compare_losses_target,
    localrule: True
