"""The report's comparison of training objectives (workflow target ``compare_losses``).

Each model of the config's ``compare_losses.models`` is trained twice on the same HDF5 pairs,
for the same epochs: with its own objective (the default run's model) and again with the keys
of ``compare_losses.train`` set on top (e.g. ``loss: pair_weighting``). Both are evaluated by
the same rules, and this section sets them side by side: the summary figure of each paper
table the model takes part in, and the training speed from each run's ``train_log.tsv``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from psp.evaluate.markdown import MISSING, fmt, markdown, pivot, select, with_text
from psp.evaluate.results import STS_AVG, tidy_eval_dir
from psp.io import InputError

#: The train log's column that selects the exported epoch (StsbEvaluator's primary metric).
DEV_METRIC = "stsb_dev_spearman"
NOTE = (
    "Each model trained twice on the same pairs for the same epochs, its best epoch on STS-B "
    "dev exported. STS avg: Table 2's average of STS12-16 (Pearson r x 100); STS17 and Tatoeba: "
    "the mean over the tracks and languages the model covers (Pearson r x 100, error rate %); "
    "BUCC: F1 x 100 on the test task at the dev-tuned threshold. Speed: the median over epochs "
    "of pairs per second of an epoch's training (reading, mining where the objective mines, "
    "steps; not the evaluation), from the run's own logs: comparable only between trainings "
    "the machine ran under the same load."
)


@dataclass(kw_only=True)
class Training:
    """One training of a model, as the comparison reads it.

    Args:
        model: the model's name (``es-en``).
        objective: what the row is labelled with (``margin``, ``pair_weighting``).
        metrics: the evaluation's ``metrics.json``; its CSVs lie beside it.
        train_log: the training's ``train_log.tsv``.
        bucc: ``bucc.json`` of the BUCC-style task of each pair the model mines.
    """

    model: str
    objective: str
    metrics: Path
    train_log: Path
    bucc: Sequence[Path] = ()

    def __post_init__(self) -> None:
        self.metrics, self.train_log = Path(self.metrics), Path(self.train_log)
        self.bucc = [Path(path) for path in self.bucc]


def trainings(
    entries: Sequence[Mapping],
    metrics: Sequence[str | os.PathLike],
    train_logs: Sequence[str | os.PathLike],
    bucc: Sequence[str | os.PathLike],
) -> list[Training]:
    """The trainings described by ``entries`` (``model``, ``objective`` and ``n_bucc``, the
    count of its BUCC results), their files taken in turn from the three path lists: the
    workflow passes paths as the job's inputs and only names in its params."""
    if not len(entries) == len(metrics) == len(train_logs):
        raise ValueError(
            f"{len(entries)} trainings, {len(metrics)} evaluations, {len(train_logs)} logs"
        )
    out, taken = [], 0
    for entry, metrics_path, log_path in zip(entries, metrics, train_logs, strict=True):
        n_bucc = entry["n_bucc"]
        own = bucc[taken : taken + n_bucc]
        taken += n_bucc
        out.append(
            Training(
                model=entry["model"],
                objective=entry["objective"],
                metrics=metrics_path,
                train_log=log_path,
                bucc=own,
            )
        )
    if taken != len(bucc):
        raise ValueError(f"{len(bucc)} BUCC results for {taken} expected")
    return out


def _score(scores: pd.DataFrame, **where: str) -> float | None:
    """The one value of ``scores`` matching ``where``; ``None`` where the run has none."""
    values = select(scores, **where)["value"]
    return float(values.iloc[0]) if len(values) else None


def _bucc_f1(paths: Sequence[Path]) -> float | None:
    """Mean test F1 x 100 of the pairs' BUCC-style tasks (``None`` without any)."""
    scores = []
    for path in paths:
        try:
            scores.append(100 * json.loads(path.read_text(encoding="utf-8"))["test"]["f1"])
        except (ValueError, KeyError, TypeError) as err:
            raise InputError(f"{path}: no test F1 ({err})") from None
    return sum(scores) / len(scores) if scores else None


def _cell(value: float | None) -> str:
    return MISSING if value is None else fmt(value)


def _speed(train_log: Path) -> dict[str, str]:
    """Epochs trained, the best one on STS-B dev (as the training selects it) and the median
    pairs/s of an epoch."""
    try:
        log = pd.read_csv(train_log, sep="\t")
        epochs = log[log["event"] == "epoch"]
        rate = epochs["pairs_per_s"].median()
    except (FileNotFoundError, pd.errors.ParserError, pd.errors.EmptyDataError, KeyError) as err:
        raise InputError(f"{train_log}: not a training log ({err})") from None
    dev = epochs.get(DEV_METRIC)
    best = MISSING if dev is None or dev.isna().all() else str(int(epochs["epoch"][dev.idxmax()]))
    return {
        "best epoch / epochs": f"{best} / {len(epochs)}",
        "pairs/s": MISSING if pd.isna(rate) else f"{rate:,.0f}",
    }


def summary_row(training: Training) -> dict[str, str]:
    """The row of one training in the main table."""
    scores = tidy_eval_dir(training.metrics.parent, training.model)
    sts = {
        "STS avg": _score(scores, benchmark=STS_AVG, task="mean", metric="pearson"),
        "STS-B test": _score(scores, benchmark="STSB", task="test", metric="pearson"),
        "STS17": _score(scores, benchmark="STS17", task="avg", metric="pearson"),
        "Tatoeba err": _score(scores, benchmark="Tatoeba", task="avg", metric="mean_error"),
        "BUCC F1": _bucc_f1(training.bucc),
    }
    return {
        "model": training.model,
        "objective": training.objective,
        **{name: _cell(value) for name, value in sts.items()},
        **_speed(training.train_log),
    }


def detail_table(trainings: Sequence[Training]) -> pd.DataFrame:
    """STS17 Pearson per track and Tatoeba error per language, one row per training (empty
    when no training has either)."""
    parts = []
    for training in trainings:
        scores = with_text(tidy_eval_dir(training.metrics.parent, training.model))
        rows = pd.concat(
            [
                select(scores, benchmark="STS17", metric="pearson").assign(prefix="STS17 "),
                select(scores, benchmark="Tatoeba", metric="mean_error").assign(prefix="err "),
            ]
        )
        rows = rows[rows["task"] != "avg"]
        key = f"{training.model}\t{training.objective}"
        parts.append(rows.assign(row=key, column=rows["prefix"] + rows["task"]))
    parts = [part for part in parts if not part.empty]
    if not parts:
        return pd.DataFrame()
    table = pivot(pd.concat(parts, ignore_index=True), "row", "column")
    names = table.pop("row").str.split("\t", expand=True)
    table.insert(0, "objective", names[1])
    table.insert(0, "model", names[0])
    return table


def comparison_section(trainings: Sequence[Training], level: int = 2) -> list[str]:
    """Markdown lines of the comparison: the summary table, then the per-track table."""
    if not trainings:
        return []
    summary = pd.DataFrame([summary_row(t) for t in trainings])
    heading = "#" * level
    lines = [f"{heading} Training objectives compared", "", markdown(summary, labels=2), NOTE, ""]
    detail = detail_table(trainings)
    if not detail.empty:
        title = "Per STS17 track (Pearson r x 100) and Tatoeba language (error rate %)"
        lines += [f"{heading}# {title}", "", markdown(detail, labels=2)]
    return lines
