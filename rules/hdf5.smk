# Clean pairs → piece ids in HDF5 (flat ids + offsets per side, shuffled on disk; docs/design.md §4).


rule encode_hdf5:
    input:
        pairs="results/data/{model}/pairs.tsv.gz",
        spm="results/spm/{model}.model",
    output:
        h5="results/hdf5/{model}.h5",
    log:
        "results/logs/encode_hdf5/{model}.log",
    benchmark:
        "results/benchmarks/encode_hdf5/{model}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 2
    resources:
        mem_mb=2000,
    params:
        languages=lambda wildcards: MODELS[wildcards.model]["languages"],
        max_pieces=lambda wildcards: MODELS[wildcards.model]
        .get("train", {})
        .get("max_pieces"),
    script:
        "../workflow_scripts/encode_hdf5.py"
