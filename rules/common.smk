# Configuration, derived tables and input functions. The only .smk file with Python functions.

import re
from pathlib import Path

from snakemake.utils import validate

from psp.data.sources import SOURCES
from psp.evaluate.harness import eval_files
from psp.evaluate.peers import spec_label
from psp.evaluate.results import TABLES as EVAL_TABLES
from psp.export import EXPORT_FILES
from psp.mine.config import FILTER_KEYS
from psp.workflow import checks, jobs

validate(config, schema="../psp/config.schema.yaml", set_default=True)

MIRROR = config["mirror"]
DATA_ROOT = jobs.data_root(MIRROR)
MODELS = config["models"]
MINE_PAIRS = config["mining"]
BUCC_PAIRS = config["bucc"]
PEERS = {spec_label(spec): spec for spec in config["evaluation"]["peers"]}
EXPORT_LIBRARIES = list(EXPORT_FILES)
checks.check_references(config)
checks.check_inputs_outside_results(config)


def _alternatives(names):
    return "|".join(re.escape(name) for name in names) or "__none__"


def rule_name(prefix, name):
    """Rule names are identifiers, so `es-en` becomes `prepare_es_en`."""
    identifier = re.sub(r"\W", "_", name)
    return f"{prefix}_{identifier}"


# ---- data sources -------------------------------------------------------------------------


def data_files(ref, languages=None):
    """Input files of a mirror reference: the mirror's, or those its `fetch_source_*` rule imports."""
    if not MIRROR:
        # A ref that no source provides fails here, with the known ones named.
        jobs.source_of(ref)
    return [str(path) for path in jobs.mirror_files(DATA_ROOT, ref, languages)]


def get_corpus_inputs(wildcards):
    entry = MODELS[wildcards.model]
    return [
        str(path)
        for path in jobs.refs_files(DATA_ROOT, entry["corpora"], entry["languages"])
    ]


def get_eval_data_inputs(wildcards):
    return [str(path) for path in eval_files(DATA_ROOT, get_eval_sets(wildcards))]


def get_fetch_inputs(source_id):
    """A fetch rule's input function: none, but a set only a mirror provides stops the DAG
    here, before any job runs, with a message naming the sets and the fix."""

    def inputs(wildcards):
        checks.check_downloadable(source_id, config)
        return []

    return inputs


# ---- models -------------------------------------------------------------------------------


def model_files(prefix):
    return {
        "config": f"{prefix}/config.json",
        "spm": f"{prefix}/sentencepiece.model",
        "emb": f"{prefix}/embeddings.safetensors",
    }


def eval_tables(prefix):
    """The per-benchmark tables an evaluation writes beside tables.md, which is rendered from them."""
    return {table: f"{prefix}/{table}.csv" for table in EVAL_TABLES}


def get_filter_params(wildcards):
    entry = MODELS[wildcards.model]
    return {
        "type": entry["type"],
        "corpora": entry["corpora"],
        "languages": entry["languages"],
        "filters": jobs.filter_config(entry),
        "max_pairs": entry.get("max_pairs", {}),
    }


def get_eval_sets(wildcards):
    """Tracks and Tatoeba languages the model covers; peers are evaluated on everything configured."""
    languages = (
        MODELS[wildcards.model]["languages"] if "model" in wildcards.keys() else None
    )
    return jobs.eval_sets(config["evaluation"], languages)


def export_outputs(library, prefix):
    """The files of a library's model directory under `prefix`, as named outputs (`card`: the
    README.md, written last)."""
    files = [f"{prefix}/{name}" for name in EXPORT_FILES[library]]
    return {
        "card" if path.endswith("README.md") else f"file{i}": path
        for i, path in enumerate(files)
    }


def built_peer_files(target):
    """The files of a peer folder this workflow builds, or None: a model exported by
    `export_{library}` (results/export/{library}/psp-{model}) or a model2vec model distilled by
    `distill_model2vec` (results/peers/model2vec/distilled-{source})."""
    folder = target.rstrip("/")
    exported = re.fullmatch(r"results/export/([\w-]+)/psp-([\w.-]+)", folder)
    if exported and exported[1] in EXPORT_FILES and exported[2] in MODELS:
        return list(export_outputs(exported[1], folder).values())
    if re.fullmatch(r"results/peers/model2vec/distilled-[\w.-]+", folder):
        return list(export_outputs("model2vec", folder).values())
    return None


def get_built_peer_files():
    """Every file of the peer folders this workflow builds (Table 5 loads them too)."""
    return [
        path
        for spec in PEERS.values()
        for path in built_peer_files(spec.partition(":")[2]) or []
    ]


def get_peer_inputs(wildcards):
    """The files a peer embedder loads: a psp model's, an original checkpoint and its
    SentencePiece model, a folder this workflow builds (`built_peer_files`), or a local
    sentence-transformers folder (a model name is looked up in the sentence-transformers cache
    instead)."""
    kind, _, target = PEERS[wildcards.peer].partition(":")
    built = built_peer_files(target)
    if built is not None:
        return {"peer_card": built[-1], "peer_files": built}
    if kind == "psp":
        return model_files(target.rstrip("/"))
    if kind == "original":
        ckpt, _, spm = target.rpartition(":")
        return {"checkpoint": ckpt, "spm": spm}
    if kind == "st" and Path(target).exists():
        return {"st_model": target}
    return {}


# ---- mining -------------------------------------------------------------------------------


def get_mine_text_inputs(wildcards):
    refs = MINE_PAIRS[wildcards.pair][wildcards.side]
    return [
        path
        for ref in refs
        for path in (data_files(ref) if jobs.is_mirror_ref(ref) else [ref])
    ]


def get_mine_text_params(wildcards):
    entry = MINE_PAIRS[wildcards.pair]
    return {
        "lang": wildcards.pair.split("-")[0 if wildcards.side == "src" else 1],
        "filters": {key: entry[key] for key in ("min_tokens", "max_tokens", "langid")},
        "text_field": entry["text_field"],
    }


def get_mine_params(wildcards):
    """The miner's settings (psp MineConfig keys) for a pair."""
    entry = MINE_PAIRS[wildcards.pair]
    index = {key: entry[key] for key in ("ivf_min_size", "nlist", "nprobe", "compare")}
    keys = ("k", "margin", "retrieval", "threshold", "float16")
    return {key: entry[key] for key in keys} | {
        "n_shards": entry["shards"],
        "index": index,
        "filters": pair_filters(entry),
    }


def pair_filters(entry):
    """The pair filters of a `mining` entry (psp PairFilterConfig keys)."""
    return {key: entry[key] for key in FILTER_KEYS}


def get_mine_threshold_input(wildcards):
    """The BUCC-style evaluation whose dev optimum a `threshold: auto` pair mines at, if any."""
    bucc = jobs.threshold_bucc(config, wildcards.pair)
    return {"bucc": f"results/bucc/{bucc}/bucc.json"} if bucc else {}


def get_mine_model(wildcards):
    return model_files(f"results/models/{MINE_PAIRS[wildcards.pair]['model']}")


def get_shard_count(wildcards):
    return MINE_PAIRS[wildcards.pair]["shards"]


def get_knn_threads(wildcards):
    return jobs.knn_job_threads(get_shard_count(wildcards))


def get_mine_plans(wildcards):
    """Both sides' shard plans: row counts and offsets, and whether the pair uses IVF."""
    return {
        f"{side}_plan": f"results/mine/work/{wildcards.pair}/{side}.plan.json"
        for side in ("src", "tgt")
    }


def get_side_shards(wildcards, side):
    return expand(
        "results/mine/work/{pair}/emb/{side}.{shard}.npy",
        pair=wildcards.pair,
        side=side,
        shard=range(get_shard_count(wildcards)),
    )


def get_knn_parts(wildcards):
    n = MINE_PAIRS[wildcards.pair]["shards"]
    return expand(
        "results/mine/work/{pair}/knn/{src_shard}.{tgt_shard}.npz",
        pair=wildcards.pair,
        src_shard=range(n),
        tgt_shard=range(n),
    )


def bucc_data_files(pair):
    """The data files of a `bucc` entry's task, in the order of `jobs.bucc_refs`."""
    refs = jobs.bucc_refs(BUCC_PAIRS[pair])
    return [str(path) for path in jobs.refs_files(DATA_ROOT, refs, pair.split("-"))]


def get_bucc_inputs(wildcards):
    """The model's files and, in the order of `jobs.bucc_refs`, the files of every ref."""
    entry = BUCC_PAIRS[wildcards.bucc]
    return model_files(f"results/models/{entry['model']}") | {
        "data": bucc_data_files(wildcards.bucc)
    }


def selection_bucc(model):
    """The `bucc` entry whose dev gold picks a model's best epoch (its own pair's, else the first
    naming the model), or None: such a model is selected on dev retrieval, others on STS-B.
    """
    pairs = [pair for pair, entry in BUCC_PAIRS.items() if entry["model"] == model]
    return model if model in pairs else next(iter(pairs), None)


def get_train_inputs(wildcards):
    inputs = {
        "h5": f"results/hdf5/{wildcards.model}.h5",
        "spm": f"results/spm/{wildcards.model}.model",
        "dev": data_files("sts/stsb"),
    }
    pair = selection_bucc(wildcards.model)
    if pair is not None:
        inputs["bitext_dev"] = bucc_data_files(pair)
    return inputs


def train_job(model, train):
    """A training job's settings: the `train` keys and, for a model selected on dev retrieval,
    its BUCC-style task (`selection_bucc`)."""
    pair = selection_bucc(model)
    if pair is None:
        return {"train": train, "bitext_dev": None}
    entry = BUCC_PAIRS[pair]
    return {
        "train": train,
        "bitext_dev": {
            "data": jobs.bucc_data(entry, pair),
            "refs": jobs.bucc_refs(entry),
        },
    }


def get_bucc_params(wildcards):
    entry = BUCC_PAIRS[wildcards.bucc]
    mine = MINE_PAIRS.get(wildcards.bucc, {})
    return {
        "entry": {
            key: entry[key] for key in ("dev", "test", "distractors", "max_distractors")
        },
        "mine": {key: mine[key] for key in ("k", "margin", "retrieval") if key in mine}
        | ({"filters": pair_filters(mine)} if mine else {}),
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
    """Everything the report gathers, by section. psp.report finds an evaluation's CSVs beside
    its metrics.json and a pair's mined pairs beside its stats (the keys `tables` and
    `mined_pairs` only make them inputs).
    """
    eval_dirs = [
        *(f"results/eval/{model}" for model in MODELS),
        *(f"results/eval/untrained/{model}" for model in MODELS),
        *(f"results/eval/peers/{peer}" for peer in PEERS),
    ]
    return {
        "evals": [f"results/eval/{model}/metrics.json" for model in MODELS],
        "floors": [f"results/eval/untrained/{model}/metrics.json" for model in MODELS],
        "peers": [f"results/eval/peers/{peer}/metrics.json" for peer in PEERS],
        "train_logs": [f"results/train/{model}/train_log.tsv" for model in MODELS],
        "mined": [get_mine_outputs(pair)[1] for pair in MINE_PAIRS],
        "bucc": [f"results/bucc/{pair}/bucc.json" for pair in BUCC_PAIRS],
        "tables": [path for d in eval_dirs for path in eval_tables(d).values()],
        "data_stats": [f"results/data/{model}/filter_stats.json" for model in MODELS],
        "mined_pairs": [get_mine_outputs(pair)[0] for pair in MINE_PAIRS],
        "spm_stats": [f"results/spm/{model}.stats.json" for model in MODELS],
        "speed": "results/speed/speed.csv",
        "speed_plot": "results/speed/speed_quality.png",
        **get_compare_inputs(),
    }


# ---- training objectives compared (opt-in target compare_losses) --------------------------

COMPARE_LOSSES = config["compare_losses"]


def get_compare_train(model):
    """The second training's keys: the model's own with compare_losses.train on top."""
    return MODELS[model].get("train", {}) | COMPARE_LOSSES["train"]


def get_compare_bucc_inputs(wildcards):
    """A BUCC task's inputs with the model of its second training."""
    model = BUCC_PAIRS[wildcards.bucc]["model"]
    return get_bucc_inputs(wildcards) | model_files(
        f"results/compare_losses/models/{model}"
    )


def _compare_trainings():
    """(output prefix, model, objective, BUCC pairs) of both trainings of each compared model."""
    for model in COMPARE_LOSSES["models"]:
        pairs = [pair for pair, entry in BUCC_PAIRS.items() if entry["model"] == model]
        first = MODELS[model].get("train", {}).get("loss", "margin")
        second = get_compare_train(model).get("loss", "margin")
        if second == first:
            second += " (compare_losses.train)"
        yield "results", model, first, pairs
        yield "results/compare_losses", model, second, pairs


def get_compare_inputs():
    """The report's inputs of the comparison (none while compare_losses.models is empty)."""
    trainings = list(_compare_trainings())
    return {
        "compare_evals": [
            f"{pre}/eval/{model}/metrics.json" for pre, model, _, _ in trainings
        ],
        "compare_logs": [
            f"{pre}/train/{model}/train_log.tsv" for pre, model, _, _ in trainings
        ],
        "compare_bucc": [
            f"{pre}/bucc/{pair}/bucc.json"
            for pre, _, _, pairs in trainings
            for pair in pairs
        ],
    }


def get_compare_params():
    """What psp.report.compare_losses.trainings needs besides the paths."""
    return [
        {"model": model, "objective": objective, "n_bucc": len(pairs)}
        for _, model, objective, pairs in _compare_trainings()
    ]


def get_compare_losses_target(wildcards):
    if not COMPARE_LOSSES["models"]:
        raise WorkflowError(
            "compare_losses.models is empty: list the models to compare, e.g. "
            "--configfile configs/compare_losses.yaml (docs/training.md)"
        )
    return ["results/report.md"]


def get_final_output():
    return [
        "results/report.md",
        *(f"results/models/{model}/README.md" for model in MODELS),
        *(f"results/models/untrained/{model}/README.md" for model in MODELS),
    ]
