# Configuration, derived tables and input functions. The only .smk file with Python functions.

import os
import re
from pathlib import Path

from snakemake.utils import validate

from psp import workflow_config as wc
from psp.evaluate.peers import spec_label

validate(config, schema="../configs/config.schema.yaml", set_default=True)

MIRROR = config["mirror"]
DATA_ROOT = wc.data_root(MIRROR)
MODELS = config["models"]
MINE_PAIRS = config["mining"]
BUCC_PAIRS = config["bucc"]
PEERS = {spec_label(spec): spec for spec in config["evaluation"]["peers"]}
wc.check_references(config)


def _alternatives(names):
    return "|".join(re.escape(name) for name in names) or "__none__"


def rule_name(prefix, name):
    """Target names are identifiers, so `es-en` becomes `prepare_es_en`."""
    return f"{prefix}_{name.replace('-', '_')}"


# ---- data sources -------------------------------------------------------------------------


def data_files(ref, languages=None):
    """Input files of a mirror reference: the mirror's own files, or the fetched source's manifest."""
    if MIRROR:
        return [str(path) for path in wc.mirror_files(DATA_ROOT, ref, languages)]
    return [f"results/sources/.manifests/{wc.source_of(ref)}.json"]


def get_source_root(wildcards, output):
    """Where imported sources go: the folder above the manifests of `fetch_source`."""
    return output.manifest.split("/.manifests/")[0]


def get_download_root(wildcards, output):
    """Raw downloads sit beside the imported sources (`results/downloads`)."""
    return os.path.join(
        os.path.dirname(get_source_root(wildcards, output)), "downloads"
    )


def get_corpus_inputs(wildcards):
    spec = MODELS[wildcards.model]
    return [
        path
        for corpus in spec["corpora"]
        for path in data_files(corpus, spec["languages"])
    ]


def get_eval_data_inputs(wildcards):
    if MIRROR:
        return [
            str(path) for path in wc.eval_files(DATA_ROOT, get_eval_params(wildcards))
        ]
    return [path for ref in wc.EVAL_SOURCE_IDS for path in data_files(ref)]


# ---- models -------------------------------------------------------------------------------


def model_files(prefix):
    return {
        "config": f"{prefix}/config.json",
        "spm": f"{prefix}/sentencepiece.model",
        "emb": f"{prefix}/embeddings.safetensors",
    }


def get_filter_params(wildcards):
    spec = MODELS[wildcards.model]
    return {
        "type": spec["type"],
        "corpora": spec["corpora"],
        "languages": spec["languages"],
        "filters": wc.filter_config(spec),
        "max_pairs": spec.get("max_pairs", {}),
        "data_root": str(DATA_ROOT),
    }


def get_eval_params(wildcards):
    """Tracks and Tatoeba languages the model covers; peers are evaluated on everything configured."""
    languages = (
        MODELS[wildcards.model]["languages"] if "model" in wildcards.keys() else None
    )
    return wc.eval_plan(config["evaluation"], languages) | {"data_root": str(DATA_ROOT)}


# ---- mining -------------------------------------------------------------------------------


def mine_dir(pair):
    return f"results/mine/{MINE_PAIRS[pair]['model']}/{pair}"


def get_mine_text_inputs(wildcards):
    refs = MINE_PAIRS[wildcards.pair][wildcards.side]
    return [
        path
        for ref in refs
        for path in (data_files(ref) if wc.is_mirror_ref(ref) else [ref])
    ]


def get_mine_text_params(wildcards):
    spec = MINE_PAIRS[wildcards.pair]
    return {
        "refs": spec[wildcards.side],
        "lang": wildcards.pair.split("-")[0 if wildcards.side == "src" else 1],
        "data_root": str(DATA_ROOT),
        "filters": {key: spec[key] for key in ("min_tokens", "max_tokens", "langid")},
    }


def get_mine_params(wildcards):
    """The miner's settings (psp MineConfig keys) for a pair."""
    spec = MINE_PAIRS[wildcards.pair]
    index = {key: spec[key] for key in ("ivf_min_size", "nlist", "nprobe")}
    keys = ("k", "margin", "retrieval", "threshold", "float16")
    return {key: spec[key] for key in keys} | {
        "n_shards": spec["shards"],
        "index": index,
    }


def get_mine_model(wildcards):
    return model_files(f"results/models/{MINE_PAIRS[wildcards.pair]['model']}")


def get_shard_count(wildcards):
    return MINE_PAIRS[wildcards.pair]["shards"]


def get_knn_parts(wildcards):
    n = MINE_PAIRS[wildcards.pair]["shards"]
    return expand(
        "results/mine/work/{pair}/knn/{qshard}.{dshard}.npz",
        pair=wildcards.pair,
        qshard=range(n),
        dshard=range(n),
    )


def get_bucc_inputs(wildcards):
    spec = BUCC_PAIRS[wildcards.bucc]
    refs = [
        spec["dev"],
        spec["test"],
        *spec["distractors"]["src"],
        *spec["distractors"]["tgt"],
    ]
    langs = wildcards.bucc.split("-")
    return {
        "model": list(model_files(f"results/models/{spec['model']}").values()),
        "data": [path for ref in refs for path in data_files(ref, langs)],
    }


def get_bucc_params(wildcards):
    spec = BUCC_PAIRS[wildcards.bucc]
    mine = MINE_PAIRS.get(wildcards.bucc, {})
    src, tgt = wildcards.bucc.split("-")
    return {
        "model": f"results/models/{spec['model']}",
        "data_root": str(DATA_ROOT),
        "data": {
            "dev_gold": spec["dev"],
            "test_gold": spec["test"],
            "src_lang": src,
            "tgt_lang": tgt,
            "src_distractors": [
                wc.relative_text_file(r) for r in spec["distractors"]["src"]
            ],
            "tgt_distractors": [
                wc.relative_text_file(r) for r in spec["distractors"]["tgt"]
            ],
            "n_distractors": spec["max_distractors"],
        },
        "mine": {key: mine[key] for key in ("k", "margin", "retrieval") if key in mine},
    }


# ---- targets ------------------------------------------------------------------------------


def get_model_outputs(model):
    return list(model_files(f"results/models/{model}").values())


def get_eval_outputs(model):
    return [
        f"results/eval/{model}/tables.md",
        f"results/eval/untrained/{model}/tables.md",
    ]


def get_mine_outputs(pair):
    model = MINE_PAIRS[pair]["model"]
    return [
        f"results/mine/{model}/{pair}.tsv.gz",
        f"results/mine/{model}/{pair}.stats.json",
    ]


def get_report_inputs():
    """Everything the report gathers, by section."""
    return {
        "evals": [f"results/eval/{model}/metrics.json" for model in MODELS],
        "floors": [f"results/eval/untrained/{model}/metrics.json" for model in MODELS],
        "peers": [f"results/eval/peers/{peer}/metrics.json" for peer in PEERS],
        "train_logs": [f"results/train/{model}/train_log.tsv" for model in MODELS],
        "mined": [get_mine_outputs(pair)[1] for pair in MINE_PAIRS],
        "bucc": [f"results/bucc/{pair}/bucc.json" for pair in BUCC_PAIRS],
    }


def get_final_output():
    return ["results/report.md"]
