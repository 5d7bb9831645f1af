# One shared SentencePiece unigram model per model, trained on the normalised text of both sides,
# and what it drops of held-out text (results/spm/{model}.stats.json, for the report).


rule train_sentencepiece:
    input:
        pairs="results/data/{model}/pairs.tsv.gz",
    output:
        model="results/spm/{model}.model",
    log:
        "results/logs/train_sentencepiece/{model}.log",
    benchmark:
        "results/benchmarks/train_sentencepiece/{model}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
    params:
        spm=lambda wildcards: MODELS[wildcards.model].get("spm", {}),
        languages=lambda wildcards: MODELS[wildcards.model]["languages"],
    script:
        "../workflow_scripts/train_sentencepiece.py"


rule spm_stats:
    input:
        model="results/spm/{model}.model",
        heldout=lambda wildcards: [
            path
            for corpus in jobs.heldout_corpora(wildcards.model, config)
            for path in data_files(corpus, MODELS[wildcards.model]["languages"])
        ],
    output:
        stats="results/spm/{model}.stats.json",
    log:
        "results/logs/spm_stats/{model}.log",
    conda:
        "../envs/psp.yaml"
    resources:
        mem_mb=1000,
    params:
        spm=lambda wildcards: MODELS[wildcards.model].get("spm", {}),
        languages=lambda wildcards: MODELS[wildcards.model]["languages"],
        heldout=lambda wildcards: jobs.heldout_corpora(wildcards.model, config),
    script:
        "../workflow_scripts/spm_stats.py"
