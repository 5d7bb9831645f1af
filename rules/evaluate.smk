# STS 2012-16 + STS-B (Table 2), SemEval-2017 (Table 3), Tatoeba (Table 4) for every model,
# its untrained floor and any configured peer embedder. Each benchmark's table is an output
# whether or not the embedder's languages cover it (one they do not is written without rows).


rule evaluate_model:
    input:
        unpack(lambda wildcards: model_files(f"results/models/{wildcards.model}")),
        data=get_eval_data_inputs,
    output:
        **eval_tables("results/eval/{model}"),
        tables=report(
            "results/eval/{model}/tables.md",
            caption="../report/tables.rst",
            category="Evaluation",
            labels={"model": "{model}"},
        ),
        metrics="results/eval/{model}/metrics.json",
    log:
        "results/logs/evaluate_model/{model}.log",
    benchmark:
        "results/benchmarks/evaluate_model/{model}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
    params:
        eval_sets=get_eval_sets,
    script:
        "../workflow_scripts/evaluate.py"


use rule evaluate_model as evaluate_untrained with:
    input:
        unpack(
            lambda wildcards: model_files(
                f"results/models/untrained/{wildcards.model}"
            )
        ),
        data=get_eval_data_inputs,
    output:
        **eval_tables("results/eval/untrained/{model}"),
        tables="results/eval/untrained/{model}/tables.md",
        metrics="results/eval/untrained/{model}/metrics.json",
    log:
        "results/logs/evaluate_untrained/{model}.log",
    benchmark:
        "results/benchmarks/evaluate_untrained/{model}.tsv"
    params:
        eval_sets=get_eval_sets,


use rule evaluate_model as evaluate_peer with:
    input:
        unpack(get_peer_inputs),
        data=get_eval_data_inputs,
    output:
        **eval_tables("results/eval/peers/{peer}"),
        tables="results/eval/peers/{peer}/tables.md",
        metrics="results/eval/peers/{peer}/metrics.json",
    log:
        "results/logs/evaluate_peer/{peer}.log",
    benchmark:
        "results/benchmarks/evaluate_peer/{peer}.tsv"
    params:
        eval_sets=get_eval_sets,
        peer=lambda wildcards: PEERS[wildcards.peer],
