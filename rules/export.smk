# Model cards (README.md with the Hugging Face metadata header and the model's own figures) in
# every model directory, the models in sentence-transformers' and model2vec's layouts, and the
# static peers built from other models (psp.export, psp.export.model_card, psp.evaluate.peers).


rule model_card:
    input:
        unpack(lambda wildcards: model_files(f"results/models/{wildcards.model}")),
        **eval_tables("results/eval/{model}"),
        metrics="results/eval/{model}/metrics.json",
    output:
        card="results/models/{model}/README.md",
    log:
        "results/logs/model_card/{model}.log",
    localrule: True
    conda:
        "../envs/psp.yaml"
    params:
        corpora=lambda wildcards: MODELS[wildcards.model]["corpora"],
        untrained=False,
    script:
        "../workflow_scripts/model_card.py"


use rule model_card as untrained_model_card with:
    input:
        unpack(
            lambda wildcards: model_files(
                f"results/models/untrained/{wildcards.model}"
            )
        ),
        **eval_tables("results/eval/untrained/{model}"),
        metrics="results/eval/untrained/{model}/metrics.json",
    output:
        card="results/models/untrained/{model}/README.md",
    log:
        "results/logs/untrained_model_card/{model}.log",
    params:
        corpora=lambda wildcards: MODELS[wildcards.model]["corpora"],
        untrained=True,


for _library in EXPORT_LIBRARIES:

    rule:
        name:
            rule_name("export", _library)
        input:
            unpack(lambda wildcards: model_files(f"results/models/{wildcards.model}")),
            card="results/models/{model}/README.md",
        output:
            **export_outputs(_library, f"results/export/{_library}/psp-{{model}}"),
        log:
            f"results/logs/export/{_library}/{{model}}.log",
        benchmark:
            f"results/benchmarks/export/{_library}/{{model}}.tsv"
        conda:
            "../envs/psp.yaml"
        params:
            library=_library,
        script:
            "../workflow_scripts/export_model.py"


rule distill_model2vec:
    output:
        **export_outputs("model2vec", "results/peers/model2vec/distilled-{source}"),
    log:
        "results/logs/distill_model2vec/{source}.log",
    benchmark:
        "results/benchmarks/distill_model2vec/{source}.tsv"
    conda:
        "../envs/psp.yaml"
    threads: 2
    resources:
        mem_mb=3000,
    script:
        "../workflow_scripts/distill_model2vec.py"
