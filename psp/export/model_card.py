"""Model cards: a ``README.md`` in every model directory, so a directory can be shared as it is.

The card opens with the Hugging Face metadata header (languages, the training data's licences,
the corpora as ``datasets``, the model's own evaluation figures as ``model-index``), then says
what the model is, how to load it, what it was trained on under which terms, and its figures,
read from its own evaluation directory (``results/eval/{model}``: the same CSVs the report
reads). :func:`export_card` rewrites a card for an exported copy (``psp export``): the same
metadata and figures, the library's name and its way of loading.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import yaml

from psp.data.sources.registry import SourceError, select
from psp.evaluate.markdown import fmt
from psp.evaluate.results import STS_AVG, tidy_eval_dir
from psp.io import InputError, atomic_path

__all__ = ["card_text", "export_card", "write_model_card"]

CARD_NAME = "README.md"
#: Licence texts of the registry that are one SPDX licence, as the Hub's ``license`` key wants.
SPDX = {"CC BY-SA 4.0": "cc-by-sa-4.0", "CC0": "cc0-1.0", "MIT": "mit"}
USE_HEADING = "## Use"
#: The evaluation's metrics, as the card's tables and ``model-index`` name them.
METRIC_NAMES = {
    "pearson": "Pearson r x 100",
    "spearman": "Spearman rho x 100",
    "xx2en_error": "error % xx→en",
    "en2xx_error": "error % en→xx",
    "mean_error": "error % (mean)",
}
_NO_SCORES = pd.DataFrame(columns=["benchmark", "task", "metric", "value"])
USAGE = {
    "psp-mine": (
        '```python\nimport psp\n\nmodel = psp.load("{dir}")\n'
        'vectors = model.embed(["The cat sleeps.", "A cat is asleep."])\n```\n\n'
        "or `psp embed --model {dir} --input sentences.txt --output vectors.npy`."
    ),
    "sentence-transformers": (
        "```python\nfrom sentence_transformers import SentenceTransformer\n\n"
        'model = SentenceTransformer("{dir}")\n'
        'vectors = model.encode(["The cat sleeps.", "A cat is asleep."])\n```'
    ),
    "model2vec": (
        "```python\nfrom model2vec import StaticModel\n\n"
        'model = StaticModel.from_pretrained("{dir}")\n'
        'vectors = model.encode(["The cat sleeps.", "A cat is asleep."])\n```'
    ),
}
EXPORT_NOTE = (
    "Exported by `psp export` from a psp-mine model directory: the same table and the same "
    "pieces (a `tokenizers` Unigram rebuilt from the SentencePiece model), so the vectors point "
    "where `psp embed`'s do: cosine ≥ 0.9999 on every STS-B and Tatoeba line of the default "
    "models but where SentencePiece's float32 scores tie (psp-mine's docs/export.md)."
)


def corpus_licences(corpora: Sequence[str]) -> dict[str, str]:
    """Each corpus id with the licence the source registry states for it (``?`` if none)."""
    licences = {}
    for corpus in corpora:
        try:
            stated = sorted({source.license for source in select(corpus) if source.license})
        except SourceError:
            stated = []
        licences[corpus] = "; ".join(stated) or "?"
    return licences


def _licence_keys(licences: dict[str, str]) -> dict:
    """The Hub's ``license`` keys: one SPDX id when every corpus has the same one, else
    ``other`` (the card's table lists each corpus's terms)."""
    distinct = set(licences.values())
    if not distinct:
        return {}
    if len(distinct) == 1 and (spdx := SPDX.get(distinct.pop())):
        return {"license": spdx}
    return {"license": "other", "license_name": "training-data-terms"}


def _results(name: str, scores: pd.DataFrame) -> list[dict]:
    """``model-index`` results: STS avg and STS-B (Pearson, Spearman), every STS17 track,
    every Tatoeba language's mean error."""
    wanted = [
        (STS_AVG, "mean", "STS", "STS 2012-2016 (average of the yearly means)"),
        ("STSB", "test", "STS", "STS Benchmark test"),
        ("STSB", "dev", "STS", "STS Benchmark dev"),
    ]
    wanted += [("STS17", t, "STS", f"SemEval-2017 STS {t}") for t in _tasks(scores, "STS17")]
    wanted += [
        ("Tatoeba", t, "BitextMining", f"Tatoeba {t}-eng") for t in _tasks(scores, "Tatoeba")
    ]
    results = []
    for benchmark, task, kind, label in wanted:
        rows = scores[(scores["benchmark"] == benchmark) & (scores["task"] == task)]
        metrics = [
            {"type": metric, "value": round(float(value), 2), "name": METRIC_NAMES[metric]}
            for metric, value in zip(rows["metric"], rows["value"], strict=True)
            if metric in ("pearson", "spearman", "mean_error") and pd.notna(value)
        ]
        if metrics:
            results.append(
                {
                    "task": {"type": kind},
                    "dataset": {"name": label, "type": f"{benchmark}/{task}"},
                    "metrics": metrics,
                }
            )
    return [{"name": name, "results": results}] if results else []


def _tasks(scores: pd.DataFrame, benchmark: str) -> list[str]:
    tasks = scores.loc[scores["benchmark"] == benchmark, "task"].drop_duplicates()
    return [t for t in tasks if t != "avg"]


def card_metadata(
    config, *, name: str, licences: dict[str, str], scores: pd.DataFrame, library: str
) -> dict:
    """The Hugging Face metadata header of a model's card."""
    metadata = {
        "language": list(dict.fromkeys(config.languages)) or None,
        **_licence_keys(licences),
        "datasets": list(licences) or None,
        "library_name": library,
        "pipeline_tag": "sentence-similarity",
        "tags": ["sentence-similarity", "static-embeddings", "p-sp", "psp-mine"],
        "model-index": _results(name, scores) or None,
    }
    return {key: value for key, value in metadata.items() if value is not None}


def _figures(scores: pd.DataFrame) -> str:
    """The model's figures as Markdown: one table for the correlations, one for the error
    rates, a row per benchmark and task in the order the evaluation wrote them."""
    tables = []
    for metrics in (("pearson", "spearman"), ("xx2en_error", "en2xx_error", "mean_error")):
        part = scores[scores["metric"].isin(metrics)]
        if part.empty:
            continue
        rows: dict[tuple[str, str], dict[str, float]] = {}
        for benchmark, task, metric, value in part[["benchmark", "task", "metric", "value"]].values:
            rows.setdefault((benchmark, task), {})[metric] = value
        lines = [
            "| benchmark | task | " + " | ".join(METRIC_NAMES[m] for m in metrics) + " |",
            "|---|---|" + "---|" * len(metrics),
        ]
        lines += [
            f"| {benchmark} | {task} | "
            + " | ".join(fmt(values.get(m, float("nan"))) for m in metrics)
            + " |"
            for (benchmark, task), values in rows.items()
        ]
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


def _body(config, *, name: str, licences: dict[str, str], scores, untrained: bool) -> str:
    what = (
        "Untrained floor: random piece embeddings over the SentencePiece vocabulary of the "
        "corpora below, the baseline every trained model must clear."
        if untrained
        else "P-SP paraphrastic sentence embeddings (Wieting et al.): the mean of the "
        "SentencePiece piece embeddings of a lowercased sentence, trained with a margin loss "
        "and hardest in-batch negatives on the corpora below."
    )
    corpora = (
        "| corpus | licence as stated upstream |\n|---|---|\n"
        + "\n".join(f"| {corpus} | {licence} |" for corpus, licence in licences.items())
        if licences
        else "Not recorded with this model."
    )
    figures = (
        _figures(scores.query("benchmark != 'STS17' or task != 'avg'"))
        if len(scores)
        else "Not evaluated."
    )
    return (
        f"# {name}\n\n{what}\n\nVocabulary {config.vocab_size} pieces, {config.dim} dimensions, "
        f"languages: {', '.join(dict.fromkeys(config.languages)) or 'not recorded'}.\n\n"
        f"{USE_HEADING}\n\n{USAGE['psp-mine'].format(dir=name)}\n\n"
        f"## Training data\n\n{corpora}\n\n"
        "## Evaluation\n\nThe model's own figures (psp-mine's harness: Pearson/Spearman r x 100 "
        f"for STS, error rate % for Tatoeba, lower is better).\n\n{figures}\n"
    )


def card_text(
    config,
    *,
    name: str,
    corpora: Sequence[str],
    scores: pd.DataFrame,
    untrained: bool = False,
) -> str:
    """The card of a psp model directory: metadata header, description, use, data, figures."""
    licences = corpus_licences(corpora)
    metadata = card_metadata(
        config, name=name, licences=licences, scores=scores, library="psp-mine"
    )
    body = _body(config, name=name, licences=licences, scores=scores, untrained=untrained)
    return _render(metadata, body)


def _render(metadata: dict, body: str) -> str:
    header = yaml.safe_dump(metadata, sort_keys=False, allow_unicode=True)
    return f"---\n{header}---\n\n{body}"


def split_card(text: str, where: str) -> tuple[dict, str]:
    """A card's metadata header and body; a header that is not YAML is an error naming
    ``where``."""
    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        raise InputError(f"{where}: no '---' metadata header")
    header, body = text[4:].split("\n---\n", 1)
    try:
        metadata = yaml.safe_load(header) or {}
    except yaml.YAMLError as err:
        raise InputError(f"{where}: metadata header is not YAML: {err}") from None
    if not isinstance(metadata, dict):
        raise InputError(f"{where}: metadata header is not a mapping")
    return metadata, body.lstrip("\n")


def write_model_card(
    model_dir: str | os.PathLike,
    *,
    corpora: Sequence[str],
    eval_dir: str | os.PathLike | None,
    untrained: bool = False,
) -> Path:
    """Write ``model_dir/README.md`` from its ``config.json`` and its evaluation's CSVs."""
    from psp.model.directory import CONFIG_NAME, ModelConfig

    model_dir = Path(model_dir)
    config_file = model_dir / CONFIG_NAME
    config = ModelConfig.from_json(config_file.read_text(encoding="utf-8"), str(config_file))
    name = model_dir.name
    scores = tidy_eval_dir(eval_dir, model=name) if eval_dir is not None else _NO_SCORES
    text = card_text(config, name=name, corpora=corpora, scores=scores, untrained=untrained)
    with atomic_path(model_dir / CARD_NAME) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return model_dir / CARD_NAME


def export_card(model_dir: str | os.PathLike, config, *, library: str) -> str:
    """The card of an exported copy of ``model_dir``: its own card (or, without one, a card from
    its config alone) with ``library_name``, the library's tag and way of loading."""
    name = Path(model_dir).name
    source = Path(model_dir) / CARD_NAME
    if source.exists():
        text, where = source.read_text(encoding="utf-8"), str(source)
    else:
        text, where = card_text(config, name=name, corpora=[], scores=_NO_SCORES), name
    metadata, body = split_card(text, where)
    metadata["library_name"] = library
    metadata["tags"] = list(dict.fromkeys([*metadata.get("tags", []), library]))
    usage = f"{EXPORT_NOTE}\n\n{USAGE[library].format(dir=name)}\n\n"
    before, found, after = body.partition(f"{USE_HEADING}\n\n")
    if not found:
        return _render(metadata, f"{body}\n{USE_HEADING}\n\n{usage}")
    # The library's usage replaces psp's, up to the next section.
    rest = after[after.find("\n## ") + 1 :] if "\n## " in after else ""
    return _render(metadata, f"{before}{USE_HEADING}\n\n{usage}{rest}")
