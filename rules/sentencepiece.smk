# One shared SentencePiece unigram model per model, trained on the lowercased text of both sides.


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
    script:
        "../workflow_scripts/train_sentencepiece.py"
