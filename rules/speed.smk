# Table 5: sentences/s (1 thread and all the job's threads), load time and peak RSS of every
# trained model and peer, beside its STS average (psp.evaluate.speed). The job takes all the
# cores, so Snakemake runs it alone; on a machine busy with other work the rates mean little.


rule speed:
    input:
        models=[path for model in MODELS for path in get_model_outputs(model)],
        model_configs=[f"results/models/{model}/config.json" for model in MODELS],
        evals=[f"results/eval/{model}/metrics.json" for model in MODELS],
        peer_evals=[f"results/eval/peers/{peer}/metrics.json" for peer in PEERS],
        peer_models=get_built_peer_files(),
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
    # More than any machine has: Snakemake lowers it to the cores it was given, so the job runs
    # alone on all of them (workflow.cores itself is undefined for --report and --lint).
    threads: 1024
    resources:
        mem_mb=6000,
    params:
        peers=[*PEERS.values(), *config["speed"]["peers"]],
        sentences=config["speed"]["sentences"],
    script:
        "../workflow_scripts/speed.py"
