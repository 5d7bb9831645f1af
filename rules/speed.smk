# Table 5: sentences/s (1 thread and all the job's threads), load time and peak RSS of every
# trained model and peer, beside its STS average (psp.evaluate.speed). Not part of `all`: run
# `snakemake speed` on an otherwise idle machine, the rates mean little on a busy one.


rule speed:
    input:
        models=[path for model in MODELS for path in get_model_outputs(model)],
        evals=[f"results/eval/{model}/metrics.json" for model in MODELS],
        peer_evals=[f"results/eval/peers/{peer}/metrics.json" for peer in PEERS],
        news=[path for ref in config["speed"]["news"] for path in data_files(ref)],
    output:
        csv="results/speed/speed.csv",
        plot="results/speed/speed_quality.png",
    log:
        "results/logs/speed/speed.log",
    benchmark:
        "results/benchmarks/speed/speed.tsv"
    conda:
        "../envs/psp.yaml"
    threads: workflow.cores
    resources:
        mem_mb=6000,
    params:
        models=[f"results/models/{model}" for model in MODELS],
        peers=[*PEERS.values(), *config["speed"]["peers"]],
        eval_root="results/eval",
        sentences=config["speed"]["sentences"],
    script:
        "../workflow_scripts/speed.py"
