"""Result files of an evaluation directory and the paper-layout markdown built from them.

An evaluation directory holds ``sts.csv``, ``sts17.csv``, ``tatoeba.csv`` (the evaluators'
rows) and ``metrics.json``. The markdown is always rendered from those files, so one model's
``tables.md`` and a report comparing several models (:func:`combine_tables`) cannot disagree.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from psp.evaluate.base import Row
from psp.io import InputError, atomic_open, iter_lines

TABLES = ("sts", "sts17", "tatoeba")
FLOOR_LABEL = "floor (untrained, random pieces)"
_INTEGER_COLUMNS = {"n_pairs"}
_FLOAT_COLUMNS = {"pearson", "spearman", "xx2en_error", "en2xx_error", "mean_error"}


def write_rows(path: str | os.PathLike, columns: Sequence[str], rows: Sequence[Row]) -> None:
    """Write evaluator rows as CSV, atomically; correlations and error rates to 4 decimals."""
    with atomic_open(path, "wt") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([f"{row[c]:.4f}" if c in _FLOAT_COLUMNS else row[c] for c in columns])


def read_rows(path: str | os.PathLike) -> list[Row]:
    """Read a CSV written by :func:`write_rows` back into typed rows."""
    lines = list(iter_lines(path))
    records = list(csv.reader(text for _, text in lines))
    if not records:
        raise InputError(f"{path}: empty result file")
    header, rows = records[0], []
    for (lineno, _), record in zip(lines[1:], records[1:], strict=True):
        if len(record) != len(header):
            raise InputError(f"{path}:{lineno}: {len(record)} fields, header has {len(header)}")
        row: Row = dict(zip(header, record, strict=True))
        try:
            for column in _INTEGER_COLUMNS & row.keys():
                row[column] = int(row[column])
            for column in _FLOAT_COLUMNS & row.keys():
                row[column] = float(row[column])
        except ValueError as err:
            raise InputError(f"{path}:{lineno}: {err}") from None
        rows.append(row)
    return rows


def load_eval_dir(path: str | os.PathLike) -> dict:
    """``{"sts": rows, "sts17": rows, "tatoeba": rows, "metrics": metrics.json}``; absent files
    give empty entries (a model evaluated on a subset)."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"evaluation directory not found: {path}")
    loaded: dict = {
        name: read_rows(path / f"{name}.csv") if (path / f"{name}.csv").exists() else []
        for name in TABLES
    }
    metrics = path / "metrics.json"
    loaded["metrics"] = json.loads(metrics.read_text(encoding="utf-8")) if metrics.exists() else {}
    return loaded


def _fmt(value: float | None) -> str:
    if value is None:
        return ""
    return "n/a" if math.isnan(value) else f"{value:.1f}"


def _avg_last(keys) -> list:
    """Keys in first-seen order with the average (``avg`` or ``(avg, avg)``) moved to the end."""
    keys = list(keys)
    is_avg = [key in ("avg", ("avg", "avg")) for key in keys]
    return [k for k, a in zip(keys, is_avg, strict=True) if not a] + [
        k for k, a in zip(keys, is_avg, strict=True) if a
    ]


def _markdown(
    header: Sequence[str], body: Sequence[Sequence[str]], text_columns: int = 1
) -> list[str]:
    """A markdown table; the first ``text_columns`` columns are labels (left-aligned), the rest numbers."""
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] * text_columns + ["---:"] * (len(header) - text_columns)) + "|",
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return lines + [""]


def _lookup(rows: Sequence[Row], key_columns: tuple[str, ...]) -> dict[tuple, Row]:
    return {tuple(row[c] for c in key_columns): row for row in rows}


def _sts_section(models: Mapping[str, dict]) -> list[str]:
    all_rows = [row for data in models.values() for row in data["sts"]]
    years = list(
        dict.fromkeys(r["benchmark"] for r in all_rows if r["benchmark"].startswith("STS1"))
    )
    datasets = list(
        dict.fromkeys(
            (r["benchmark"], r["dataset"])
            for r in all_rows
            if r["benchmark"] in years and r["dataset"] not in ("mean", "all")
        )
    )
    index = {name: _lookup(data["sts"], ("benchmark", "dataset")) for name, data in models.items()}

    def cell(name: str, key: tuple, metric: str) -> str:
        row = index[name].get(key)
        return _fmt(row[metric]) if row else ""

    def by_year(kind: str, metric: str) -> list[str]:
        body = [
            [
                name,
                *(cell(name, (y, kind), metric) for y in years),
                cell(name, ("avg", kind), metric),
            ]
            for name in models
        ]
        return _markdown(["model", *years, "Avg"], body)

    out = []
    if years:
        out += ["## Table 2: STS 2012-2016 (Pearson r x 100, mean over each year's datasets)", ""]
        out += by_year("mean", "pearson")
        out += ["Per dataset (Pearson r x 100):", ""]
        out += _markdown(
            ["year", "dataset", *models],
            [
                [year, dataset, *(cell(name, (year, dataset), "pearson") for name in models)]
                for year, dataset in datasets
            ],
            text_columns=2,
        )
        out += [
            "Sentence-BERT convention (Spearman rho x 100 over each year's concatenated datasets):",
            "",
        ]
        out += by_year("all", "spearman")
    splits = list(dict.fromkeys(r["dataset"] for r in all_rows if r["benchmark"] == "STSB"))
    if splits:
        out += ["## STS Benchmark (x 100)", ""]
        out += _markdown(
            ["model", *(f"{s} {m}" for s in splits for m in ("r", "rho"))],
            [
                [
                    name,
                    *(cell(name, ("STSB", s), m) for s in splits for m in ("pearson", "spearman")),
                ]
                for name in models
            ],
        )
    return out


def _sts17_section(models: Mapping[str, dict]) -> list[str]:
    tracks = _avg_last(dict.fromkeys(r["track"] for data in models.values() for r in data["sts17"]))
    if not tracks:
        return []
    index = {name: _lookup(data["sts17"], ("track",)) for name, data in models.items()}
    out = []
    for metric, title in (("pearson", "Pearson r"), ("spearman", "Spearman rho")):
        out += [f"## Table 3: SemEval-2017 STS ({title} x 100)", ""]
        body = []
        for name in models:
            cells = [_fmt(index[name][(t,)][metric]) if (t,) in index[name] else "" for t in tracks]
            body.append([name, *cells])
        out += _markdown(["model", *tracks], body)
    return out


def _tatoeba_section(models: Mapping[str, dict]) -> list[str]:
    languages = _avg_last(
        dict.fromkeys(
            (r["language"], r["code"]) for data in models.values() for r in data["tatoeba"]
        )
    )
    if not languages:
        return []
    index = {name: _lookup(data["tatoeba"], ("code",)) for name, data in models.items()}
    metrics = (("xx2en_error", "xx→en"), ("en2xx_error", "en→xx"), ("mean_error", "mean"))
    single = len(models) == 1
    header = [
        "language",
        *(label if single else f"{name} {label}" for name in models for _, label in metrics),
    ]
    body = []
    for language, code in languages:
        cells = []
        for name in models:
            row = index[name].get((code,))
            cells += [_fmt(row[m]) if row else "" for m, _ in metrics]
        body.append([language if language == code else f"{language} ({code})", *cells])
    return ["## Table 4: Tatoeba retrieval error rate (%)", "", *_markdown(header, body)]


def _speed_section(models: Mapping[str, dict]) -> list[str]:
    speeds = {name: data["metrics"].get("speed") for name, data in models.items()}
    if not any(speeds.values()):
        return []
    body = []
    for name, speed in speeds.items():
        if speed:
            body.append(
                [
                    name,
                    f"{speed['sentences_per_s']:.0f}",
                    str(speed["threads"]),
                    str(speed["sentences"]),
                ]
            )
    return [
        "## Embedding speed (STS sentences)",
        "",
        *_markdown(["model", "sentences/s", "threads", "sentences"], body),
    ]


def render_tables(models: Mapping[str, dict]) -> str:
    """Markdown for already loaded evaluation directories (see :func:`load_eval_dir`)."""
    lines = []
    for section in (_sts_section, _sts17_section, _tatoeba_section, _speed_section):
        lines += section(models)
    return "\n".join(lines).rstrip() + "\n"


def combine_tables(
    eval_dirs: Mapping[str, str | os.PathLike], floor: str | os.PathLike | None = None
) -> str:
    """Markdown tables with several models (or peers) side by side, in the paper's layout.

    Args:
        eval_dirs: display name -> evaluation directory written by ``evaluate_embedder``.
        floor: evaluation directory of an untrained (random pieces) model; shown last as
            the floor any training must beat.

    Example:
        >>> print(combine_tables({"P-SP en": "results/eval/en", "MiniLM": "results/eval/peers/st-all-MiniLM-L6-v2"}))  # doctest: +SKIP
    """
    models = {name: load_eval_dir(path) for name, path in eval_dirs.items()}
    if floor is not None:
        models[FLOOR_LABEL] = load_eval_dir(floor)
    return render_tables(models)
