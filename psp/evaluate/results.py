"""An evaluation's result files and the tidy frame every table is rendered from.

An evaluation directory holds ``sts.csv``, ``sts17.csv``, ``tatoeba.csv`` (the evaluators'
rows, written by :func:`write_rows`) and ``metrics.json``. :func:`tidy_eval_dir` turns the CSVs
into one long frame with one row per model x benchmark x task x metric (:data:`TIDY_COLUMNS`);
:func:`collect_results` stacks the frames of a whole run (trained models, their untrained
floors, peers). Every table of an evaluation's ``tables.md`` and of the run's report is rendered
from such a frame by :mod:`psp.evaluate.markdown`, and the run's frame is ``results.csv``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from psp.evaluate.base import Row
from psp.io import InputError, atomic_open

TABLES = ("sts", "sts17", "tatoeba")
TIDY_COLUMNS = ("model", "kind", "benchmark", "task", "metric", "value")
#: The score columns of the evaluators' rows; everything else in a row names what was scored.
SCORE_COLUMNS = ("pearson", "spearman", "xx2en_error", "en2xx_error", "mean_error")
STS_AVG = "STS avg"
#: The ``benchmark`` of an STS 2012-16 year's rows (``STS17`` is SemEval-2017, another table).
STS_YEAR = r"STS1[2-6]$"


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


def collect_results(
    evals: Sequence[Path], floors: Sequence[Path] = (), peers: Sequence[Path] = ()
) -> pd.DataFrame:
    """Every score of a run (columns :data:`TIDY_COLUMNS`).

    Each path is an evaluation's ``metrics.json``; its folder is named after the model (or the
    peer), and ``kind`` is ``trained``, ``floor`` (the same model name: the untrained model of
    that name) or ``peer``.
    """
    parts = [
        tidy_eval_dir(Path(path).parent, Path(path).parent.name, kind)
        for kind, paths in (("trained", evals), ("floor", floors), ("peer", peers))
        for path in paths
    ]
    return pd.concat([pd.DataFrame(columns=list(TIDY_COLUMNS)), *parts], ignore_index=True)


def read_metrics(path: str | os.PathLike) -> dict:
    """An evaluation's ``metrics.json`` (empty when absent), with the file named on bad JSON."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: {err}") from None


def sts_average(eval_dir: str | os.PathLike | None) -> float | None:
    """The STS 2012-16 average (Pearson x 100) of an evaluation directory, the figure Table 2
    prints; ``None`` when the embedder was not evaluated on STS."""
    if eval_dir is None or not Path(eval_dir).is_dir():
        return None
    scores = tidy_eval_dir(eval_dir, model=Path(eval_dir).name)
    found = scores.loc[
        (scores["benchmark"] == STS_AVG)
        & (scores["task"] == "mean")
        & (scores["metric"] == "pearson"),
        "value",
    ]
    return float(found.iloc[0]) if len(found) else None
