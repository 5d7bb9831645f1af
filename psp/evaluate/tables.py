"""Result files of an evaluation directory as tidy pandas frames, and the Markdown built from them.

An evaluation directory holds ``sts.csv``, ``sts17.csv``, ``tatoeba.csv`` (the evaluators'
rows, written by :func:`write_rows`) and ``metrics.json``. :func:`tidy_eval_dir` turns the CSVs
into one long frame with one row per model x benchmark x task x metric (:data:`TIDY_COLUMNS`).
Every table, one model's ``tables.md`` here as well as the run's report (:mod:`psp.report`), is
a pivot of such frames, so the two cannot disagree. The helpers that format and render pivots
live here for the same reason.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from psp.evaluate.base import Row
from psp.evaluate.tatoeba import tatoeba_code
from psp.io import InputError, atomic_open

TABLES = ("sts", "sts17", "tatoeba")
TIDY_COLUMNS = ("model", "kind", "benchmark", "task", "metric", "value")
FLOOR_LABEL = "floor (untrained, random pieces)"
#: The score columns of the evaluators' rows; everything else in a row names what was scored.
SCORE_COLUMNS = ("pearson", "spearman", "xx2en_error", "en2xx_error", "mean_error")
#: A cell the results do not fill (a model not evaluated on that task), so no cell is blank.
MISSING = "–"
STS_AVG = "STS avg"
#: The ``benchmark`` of an STS 2012-16 year's rows (``STS17`` is SemEval-2017, another table).
STS_YEAR = r"STS1[2-6]$"
TATOEBA_METRICS = {"xx2en_error": "xx→en", "en2xx_error": "en→xx", "mean_error": "mean"}


def write_rows(path: str | os.PathLike, columns: Sequence[str], rows: Sequence[Row]) -> None:
    """Write evaluator rows as CSV, atomically; correlations and error rates to 4 decimals."""
    frame = pd.DataFrame(list(rows), columns=list(columns))
    with atomic_open(path, "wt") as handle:
        frame.to_csv(handle, index=False, float_format="%.4f", na_rep="nan", lineterminator="\n")


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """A CSV written by :func:`write_rows`; names stay text (a dataset called ``NA`` is not
    missing), scores are floats (``nan`` where a correlation was undefined)."""
    try:
        frame = pd.read_csv(
            path, keep_default_na=False, na_values={c: ["nan"] for c in SCORE_COLUMNS}
        )
        for column in SCORE_COLUMNS:
            if column in frame.columns:
                frame[column] = pd.to_numeric(frame[column])
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: empty result file") from None
    except (pd.errors.ParserError, ValueError) as err:
        raise InputError(f"{path}: {err}") from None
    return frame


def _keys(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """``benchmark`` and ``task`` of each row of one of :data:`TABLES`."""
    if table == "sts":
        return pd.DataFrame(
            {"benchmark": frame["benchmark"].replace({"avg": STS_AVG}), "task": frame["dataset"]}
        )
    if table == "sts17":
        return pd.DataFrame({"benchmark": "STS17", "task": frame["track"]})
    return pd.DataFrame({"benchmark": "Tatoeba", "task": frame["code"]})


def tidy_eval_dir(path: str | os.PathLike, model: str, kind: str = "trained") -> pd.DataFrame:
    """The scores of an evaluation directory, one row per benchmark x task x metric.

    ``benchmark`` is ``STS12`` ... ``STS16``, ``STS avg`` (the mean over the years), ``STSB``,
    ``STS17`` or ``Tatoeba``; ``task`` is the dataset (or ``mean`` / ``all`` per STS year, the
    split for STSB), the STS17 track or the Tatoeba code (``avg`` for the evaluators' averages).
    A table the directory lacks contributes no rows (a model evaluated on a subset).
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"evaluation directory not found: {path}")
    parts = []
    for table in TABLES:
        csv_path = path / f"{table}.csv"
        if not csv_path.exists():
            continue
        frame = read_table(csv_path)
        scores = frame[[c for c in SCORE_COLUMNS if c in frame.columns]]
        if frame.empty or scores.empty:
            continue
        parts.append(
            pd.concat([_keys(table, frame), scores], axis=1).melt(
                id_vars=["benchmark", "task"], var_name="metric", value_name="value"
            )
        )
    if not parts:
        return pd.DataFrame(columns=list(TIDY_COLUMNS))
    return pd.concat(parts, ignore_index=True).assign(model=model, kind=kind)[list(TIDY_COLUMNS)]


def read_metrics(path: str | os.PathLike) -> dict:
    """An evaluation's ``metrics.json`` (empty when absent), with the file named on bad JSON."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: {err}") from None


# ---- formatting and rendering -------------------------------------------------------------


def fmt(value: float) -> str:
    """A score x 100 (or an error rate in %) as the paper prints it; ``n/a`` where undefined."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.1f}"


def with_text(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a ``text`` column: each value formatted for a table cell."""
    return frame.assign(text=frame["value"].map(fmt))


def pivot(
    frame: pd.DataFrame, index: str | Sequence[str], columns: str, values: str = "text"
) -> pd.DataFrame:
    """``frame.pivot`` keeping rows and columns in first-seen order (pandas sorts them) and
    showing cells the frame does not fill as :data:`MISSING`; the index becomes columns."""
    index = [index] if isinstance(index, str) else list(index)
    order = frame[index].drop_duplicates()
    table = frame.pivot(index=index, columns=columns, values=values).reindex(
        index=pd.MultiIndex.from_frame(order) if len(index) > 1 else order[index[0]],
        columns=pd.unique(frame[columns]),
    )
    return table.fillna(MISSING).reset_index().rename_axis(columns=None)


def markdown(table: pd.DataFrame, labels: int = 1) -> str:
    """A pipe table; the first ``labels`` columns are left-aligned text, the rest right-aligned.

    Cells are rendered as given: tabulate's number parsing would turn ``80.0`` into ``80``.
    """
    align = ["left"] * labels + ["right"] * (len(table.columns) - labels)
    return table.to_markdown(index=False, disable_numparse=True, colalign=align) + "\n"


def select(frame: pd.DataFrame, **where: str | Iterable[str]) -> pd.DataFrame:
    """Rows of ``frame`` whose columns equal (or, for a list, are among) the given values."""
    mask = pd.Series(True, index=frame.index)
    for column, wanted in where.items():
        if isinstance(wanted, str):
            mask &= frame[column] == wanted
        else:
            mask &= frame[column].isin(list(wanted))
    return frame[mask]


def language_label(code: str) -> str:
    """``es (spa)`` for a Tatoeba code with a known ISO 639-1 code, else the code."""
    language, _ = tatoeba_code(code)
    return code if language == code else f"{language} ({code})"


# ---- one embedder's (or a few side by side) tables.md ------------------------------------


def _sts_sections(scores: pd.DataFrame) -> list[str]:
    years = scores[scores["benchmark"].str.match(STS_YEAR)]
    out = []
    by_year = select(with_text(scores), benchmark=[*years["benchmark"], STS_AVG])
    means = select(by_year, task="mean", metric="pearson")
    if not means.empty:
        out += ["## Table 2: STS 2012-2016 (Pearson r x 100, mean over each year's datasets)", ""]
        out += [markdown(pivot(means, "model", "benchmark").rename(columns={STS_AVG: "Avg"}))]
        datasets = select(with_text(years), metric="pearson")
        datasets = datasets[~datasets["task"].isin(["mean", "all"])]
        table = pivot(datasets, ["benchmark", "task"], "model")
        out += ["Per dataset (Pearson r x 100):", ""]
        out += [markdown(table.rename(columns={"benchmark": "year", "task": "dataset"}), 2)]
        alls = select(by_year, task="all", metric="spearman")
        out += [
            "Sentence-BERT convention (Spearman rho x 100 over each year's concatenated datasets):",
            "",
            markdown(pivot(alls, "model", "benchmark").rename(columns={STS_AVG: "Avg"})),
        ]
    stsb = select(with_text(scores), benchmark="STSB")
    if not stsb.empty:
        stsb = stsb.assign(
            column=stsb["task"] + stsb["metric"].map({"pearson": " r"}).fillna(" rho")
        )
        out += ["## STS Benchmark (x 100)", "", markdown(pivot(stsb, "model", "column"))]
    return out


def _sts17_sections(scores: pd.DataFrame) -> list[str]:
    tracks = with_text(select(scores, benchmark="STS17"))
    out = []
    for metric, title in (("pearson", "Pearson r"), ("spearman", "Spearman rho")):
        table = select(tracks, metric=metric)
        if not table.empty:
            out += [f"## Table 3: SemEval-2017 STS ({title} x 100)", ""]
            out += [markdown(pivot(table, "model", "task"))]
    return out


def _tatoeba_section(scores: pd.DataFrame) -> list[str]:
    tatoeba = with_text(select(scores, benchmark="Tatoeba"))
    if tatoeba.empty:
        return []
    single = tatoeba["model"].nunique() == 1
    label = tatoeba["metric"].map(TATOEBA_METRICS)
    tatoeba = tatoeba.assign(
        language=tatoeba["task"].map(language_label),
        column=label if single else tatoeba["model"] + " " + label,
    )
    return [
        "## Table 4: Tatoeba retrieval error rate (%)",
        "",
        markdown(pivot(tatoeba, "language", "column")),
    ]


def _speed_section(speeds: Mapping[str, dict | None]) -> list[str]:
    rows = [
        {
            "model": name,
            "sentences/s": f"{speed['sentences_per_s']:.0f}",
            "threads": str(speed["threads"]),
            "sentences": str(speed["sentences"]),
        }
        for name, speed in speeds.items()
        if speed
    ]
    if not rows:
        return []
    return ["## Embedding speed (STS sentences)", "", markdown(pd.DataFrame(rows))]


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
    dirs = dict(eval_dirs)
    if floor is not None:
        dirs[FLOOR_LABEL] = floor
    scores = pd.concat([tidy_eval_dir(path, name) for name, path in dirs.items()])
    speeds = {
        name: read_metrics(Path(path) / "metrics.json").get("speed") for name, path in dirs.items()
    }
    lines = [
        *_sts_sections(scores),
        *_sts17_sections(scores),
        *_tatoeba_section(scores),
        *_speed_section(speeds),
    ]
    return "\n".join(lines).rstrip() + "\n"
