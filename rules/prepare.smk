# Corpora → clean, deduplicated, filtered training pairs (docs/design.md §4 "Clean pairs").


rule filter_pairs:
    input:
        get_corpus_inputs,
    output:
        pairs="results/data/{model}/pairs.tsv.gz",
        stats="results/data/{model}/filter_stats.json",
    log:
        "results/logs/filter_pairs/{model}.log",
    benchmark:
        "results/benchmarks/filter_pairs/{model}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 2
    resources:
        mem_mb=2000,
    params:
        job=get_filter_params,
    script:
        "../workflow_scripts/filter_pairs.py"
