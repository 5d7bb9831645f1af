# Monolingual text → filtered sentences → embedding shards → shard-pair kNN → margin-scored pairs.
# Each shard and each shard pair is an independent job, so a 100M-sentence mine is a DAG that a
# cluster executor spreads out; `score_mined` is the reduce step.


rule mine_text:
    input:
        get_mine_text_inputs,
    output:
        text="results/mine/work/{pair}/{side}.txt.gz",
        stats="results/mine/work/{pair}/{side}.filter_stats.json",
    log:
        "results/logs/mine_text/{pair}.{side}.log",
    conda:
        "../envs/psp.yaml"
    threads: 2
    params:
        job=get_mine_text_params,
    script:
        "../workflow_scripts/mine_text.py"


rule embed_shard:
    input:
        unpack(get_mine_model),
        text="results/mine/work/{pair}/{side}.txt.gz",
    output:
        emb=temp("results/mine/work/{pair}/emb/{side}.{shard}.npy"),
    log:
        "results/logs/embed_shard/{pair}.{side}.{shard}.log",
    benchmark:
        "results/benchmarks/embed_shard/{pair}.{side}.{shard}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
    params:
        shards=get_shard_count,
        float16=lambda wildcards: MINE_PAIRS[wildcards.pair]["float16"],
    script:
        "../workflow_scripts/embed_shard.py"


rule knn_shard_pair:
    input:
        src="results/mine/work/{pair}/emb/src.{qshard}.npy",
        tgt="results/mine/work/{pair}/emb/tgt.{dshard}.npy",
        src_text="results/mine/work/{pair}/src.txt.gz",
        tgt_text="results/mine/work/{pair}/tgt.txt.gz",
    output:
        knn=temp("results/mine/work/{pair}/knn/{qshard}.{dshard}.npz"),
    log:
        "results/logs/knn_shard_pair/{pair}.{qshard}.{dshard}.log",
    benchmark:
        "results/benchmarks/knn_shard_pair/{pair}.{qshard}.{dshard}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 2
    resources:
        mem_mb=8000,
    params:
        shards=get_shard_count,
        mine=get_mine_params,
    script:
        "../workflow_scripts/knn_shard_pair.py"


rule score_mined:
    input:
        knn=get_knn_parts,
        src_text="results/mine/work/{pair}/src.txt.gz",
        tgt_text="results/mine/work/{pair}/tgt.txt.gz",
    output:
        pairs="results/mine/{model}/{pair}.tsv.gz",
        stats="results/mine/{model}/{pair}.stats.json",
        histogram=report(
            "results/mine/{model}/{pair}.histogram.png",
            caption="../report/mine_histogram.rst",
            category="Mining",
            labels={"pair": "{pair}"},
        ),
    log:
        "results/logs/score_mined/{model}.{pair}.log",
    benchmark:
        "results/benchmarks/score_mined/{model}.{pair}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
    params:
        mine=get_mine_params,
    script:
        "../workflow_scripts/score_mined.py"


rule evaluate_bucc:
    input:
        unpack(get_bucc_inputs),
    output:
        metrics="results/bucc/{bucc}/bucc.json",
        curve=report(
            "results/bucc/{bucc}/pr_curve.png",
            caption="../report/bucc.rst",
            category="Mining",
            labels={"pair": "{bucc}"},
        ),
    log:
        "results/logs/evaluate_bucc/{bucc}.log",
    benchmark:
        "results/benchmarks/evaluate_bucc/{bucc}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
    params:
        job=get_bucc_params,
    script:
        "../workflow_scripts/evaluate_bucc.py"
