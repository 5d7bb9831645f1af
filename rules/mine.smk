# Monolingual text → filtered, sharded sentences + shard plan → embedding shards → (IVF index per
# shard) → shard-pair kNN → margin-scored pairs. Each shard and each shard pair is an independent
# job that reads only its own slice, so a 100M-sentence mine is a DAG that a cluster executor
# spreads out; `score_mined` is the reduce step.


rule mine_text:
    input:
        get_mine_text_inputs,
    output:
        text="results/mine/work/{pair}/{side}.txt.gz",
        plan="results/mine/work/{pair}/{side}.plan.json",
        stats="results/mine/work/{pair}/{side}.filter_stats.json",
    log:
        "results/logs/mine_text/{pair}.{side}.log",
    conda:
        "../envs/psp.yaml"
    threads: 2
    params:
        job=get_mine_text_params,
        shards=get_shard_count,
    script:
        "../workflow_scripts/mine_text.py"


rule embed_shard:
    input:
        unpack(get_mine_model),
        text="results/mine/work/{pair}/{side}.txt.gz",
        plan="results/mine/work/{pair}/{side}.plan.json",
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
        float16=lambda wildcards: MINE_PAIRS[wildcards.pair]["float16"],
    script:
        "../workflow_scripts/embed_shard.py"


# Inverted lists, when the pair is large enough (`ivf_min_size`): one quantizer per pair trained on
# a sample across all shards of both sides, then each shard's rows assigned once to their nearest
# lists, read by every kNN job of its row or column of the grid (list-major search over the
# embeddings themselves). Below the size both rules write empty files: exact search. The assignment
# jobs, and the kNN jobs of a grid of more than one, take one thread each: much of such a job runs
# on one thread, so jobs side by side do the most work per core (psp.workflow.jobs.knn_job_threads).
rule train_index:
    input:
        unpack(get_mine_plans),
        src=lambda wildcards: get_side_shards(wildcards, "src"),
        tgt=lambda wildcards: get_side_shards(wildcards, "tgt"),
    output:
        index=temp("results/mine/work/{pair}/index/quantizer.npz"),
    log:
        "results/logs/train_index/{pair}.log",
    benchmark:
        "results/benchmarks/train_index/{pair}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 2
    resources:
        mem_mb=4000,
    params:
        index=lambda wildcards: get_mine_params(wildcards)["index"],
    script:
        "../workflow_scripts/train_index.py"


rule index_shard:
    input:
        trained="results/mine/work/{pair}/index/quantizer.npz",
        emb="results/mine/work/{pair}/emb/{side}.{shard}.npy",
    output:
        lists=temp("results/mine/work/{pair}/index/{side}.{shard}.lists.npz"),
    log:
        "results/logs/index_shard/{pair}.{side}.{shard}.log",
    benchmark:
        "results/benchmarks/index_shard/{pair}.{side}.{shard}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        nprobe=lambda wildcards: get_mine_params(wildcards)["index"]["nprobe"],
    script:
        "../workflow_scripts/index_shard.py"


rule knn_shard_pair:
    input:
        unpack(get_mine_plans),
        src="results/mine/work/{pair}/emb/src.{src_shard}.npy",
        tgt="results/mine/work/{pair}/emb/tgt.{tgt_shard}.npy",
        src_lists="results/mine/work/{pair}/index/src.{src_shard}.lists.npz",
        tgt_lists="results/mine/work/{pair}/index/tgt.{tgt_shard}.lists.npz",
    output:
        knn=temp("results/mine/work/{pair}/knn/{src_shard}.{tgt_shard}.npz"),
    log:
        "results/logs/knn_shard_pair/{pair}.{src_shard}.{tgt_shard}.log",
    benchmark:
        "results/benchmarks/knn_shard_pair/{pair}.{src_shard}.{tgt_shard}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: get_knn_threads
    resources:
        mem_mb=4000,
    params:
        k=lambda wildcards: get_mine_params(wildcards)["k"],
    script:
        "../workflow_scripts/knn_shard_pair.py"


# `threshold: auto` mines at the dev optimum of the pair's BUCC-style evaluation (its bucc.json
# becomes an input), or at the margin's fixed default where the pair has none.
rule score_mined:
    input:
        unpack(get_mine_plans),
        unpack(get_mine_threshold_input),
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
            labels={"pair": "{bucc}", "figure": "precision-recall"},
        ),
        scores=report(
            "results/bucc/{bucc}/score_distributions.png",
            caption="../report/bucc_scores.rst",
            category="Mining",
            labels={"pair": "{bucc}", "figure": "score distributions"},
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
