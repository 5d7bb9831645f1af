"""The run's pages: ``results/report.md`` (every table with its figures, the training curves and
the mining results), ``results/results.md`` (the tables alone: the content of
``docs/results.md``) and ``results/tables/results.csv`` (every score, tidy).

The pages only read what earlier rules wrote; they compute no metric themselves. Both are
rendered from the same tables (:func:`paper_tables`), the scores tables from the tidy frame that
is ``results.csv``, so the report, the results page and the CSV cannot disagree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

import pandas as pd

from psp.evaluate.markdown import Table, render, select
from psp.evaluate.paper_tables import score_tables
from psp.evaluate.results import collect_results
from psp.io import atomic_open
from psp.report.compare_losses import Training, comparison_section
from psp.report.figures import mining_section, training_section
from psp.report.stage_tables import bucc_table, data_tables, speed_table

FLOOR_NOTE = (
    "A cell `x (y)` gives the trained model's figure x and, in brackets, that of its untrained "
    "floor y: random piece embeddings over the same SentencePiece model, the floor any training "
    "must clear. `–` marks a task the run has no result for."
)
PAGE_INTRO = (
    "Every table of a run, written by the workflow's `report` rule to `results/results.md` from "
    "the run's outputs (`docs/results.md` is that page from the default run, `make run`); "
    "`results/report.md` shows the same tables with the learning curves, score histograms, "
    "precision-recall curves and mined samples, and `results/tables/results.csv` holds every "
    "score."
)


@dataclass
class ReportInputs:
    """What the report reads, as the workflow names it (see ``get_report_inputs``).

    ``evals``, ``floors`` and ``peers`` are evaluations' ``metrics.json`` files, their CSVs
    beside; ``languages`` and ``corpora`` map each trained model to its configured languages
    and corpora; ``speed`` and ``speed_plot`` are Table 5's inputs where the run benchmarks;
    ``loss_comparison`` the trainings of the objectives compared (:mod:`psp.report.compare_losses`).
    """

    evals: Sequence[Path]
    languages: Mapping[str, Sequence[str]]
    _: KW_ONLY
    floors: Sequence[Path] = ()
    peers: Sequence[Path] = ()
    train_logs: Sequence[Path] = ()
    mined: Sequence[Path] = ()
    bucc: Sequence[Path] = ()
    data_stats: Sequence[Path] = ()
    spm_stats: Sequence[Path] = ()
    corpora: Mapping[str, Sequence[str]] | None = None
    speed: Path | None = None
    speed_plot: Path | None = None
    loss_comparison: Sequence[Training] = ()

    def __post_init__(self) -> None:
        for name in ("evals", "floors", "peers", "train_logs", "mined", "bucc", "data_stats"):
            setattr(self, name, [Path(p) for p in getattr(self, name)])
        self.spm_stats = [Path(p) for p in self.spm_stats]
        self.speed = Path(self.speed) if self.speed else None
        self.speed_plot = Path(self.speed_plot) if self.speed_plot else None


def paper_tables(inputs: ReportInputs, scores: pd.DataFrame) -> list[list[Table]]:
    """The paper's tables of the run, one list (main table, then details) per paper table."""
    groups = [
        data_tables(inputs.data_stats, inputs.spm_stats, inputs.corpora),
        *score_tables(scores, inputs.languages),
        bucc_table(inputs.bucc),
        speed_table(inputs.speed, inputs.speed_plot),
    ]
    return [group for group in groups if group]


def _missing_note(inputs: ReportInputs, scores: pd.DataFrame) -> list[str]:
    """Trained models the run evaluated without a floor: their cells show ``(–)``."""
    floors = set(select(scores, kind="floor")["model"])
    lacking = [p.parent.name for p in inputs.evals if p.parent.name not in floors]
    if not lacking:
        return []
    return [f"No untrained floor in this run for: {', '.join(lacking)}.", ""]


def _write(path: str | os.PathLike, lines: Sequence[str]) -> None:
    with atomic_open(path, "wt") as handle:
        handle.write("\n".join(lines).rstrip() + "\n")


def write_report(
    out_path: str | os.PathLike,
    inputs: ReportInputs,
    *,
    page_path: str | os.PathLike | None = None,
    results_path: str | os.PathLike | None = None,
) -> Path:
    """Write the report and, where asked, the results page and the tidy scores.

    Args:
        out_path: ``results/report.md``.
        inputs: the run's outputs the report gathers.
        page_path: ``results/results.md``: the report's tables without pictures, training or
            mining sections; ``docs/results.md`` is its copy from the last full run.
        results_path: ``results.csv``: every score of every embedder, one row per model x
            benchmark x task x metric (columns model, kind, benchmark, task, metric, value).
    """
    out_path = Path(out_path)
    base = out_path.parent
    scores = collect_results(inputs.evals, inputs.floors, inputs.peers)
    groups = paper_tables(inputs, scores)
    note = _missing_note(inputs, scores)

    lines = ["# psp-mine report", "", "## Evaluation", "", FLOOR_NOTE, "", *note]
    lines += render(groups, level=2, base=base)
    lines += comparison_section(inputs.loss_comparison)
    if inputs.train_logs:
        lines += training_section(inputs.train_logs, base)
    if inputs.mined:
        lines += mining_section(inputs.mined, base)
    _write(out_path, lines)

    if page_path is not None:
        page = ["# Results", "", PAGE_INTRO, "", FLOOR_NOTE, "", *note]
        _write(page_path, page + render(groups, level=2))
    if results_path is not None:
        with atomic_open(results_path, "wt") as handle:
            scores.to_csv(handle, index=False, float_format="%.4f", lineterminator="\n")
    return out_path
