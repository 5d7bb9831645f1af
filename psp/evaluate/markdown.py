"""The one table renderer: every Markdown table of the project, built from tidy frames.

An evaluation's ``tables.md`` (:mod:`psp.evaluate.paper_tables`), the run's report and its
results page (:mod:`psp.report`) all build :class:`Table` objects from the helpers here (cell
text by :func:`fmt` and :func:`cells`, layout by :func:`pivot`) and write them with
:func:`render`, so a table looks the same wherever it appears. Paths in a page are relative to
the page's folder, so it renders wherever ``results/`` is copied.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

import pandas as pd

#: A cell the results do not fill (a model not evaluated on that task), so no cell is blank.
MISSING = "–"
#: The label of a row of each ``kind`` in tables with one row per embedder.
ROW_LABELS = {"trained": "{}", "floor": "untrained {} (floor)", "peer": "peer {}"}


@dataclass
class Table:
    """One table: a heading, the frame (text cells), its label columns, notes and figures.

    ``figures`` are (alt text, path) of pictures that belong under the table; they are shown
    only where :func:`render` is given the folder the links are relative to.
    """

    title: str
    frame: pd.DataFrame
    _: KW_ONLY
    labels: int = 1
    notes: Sequence[str] = ()
    figures: Sequence[tuple[str, Path]] = field(default_factory=list)

    def render(self, level: int, base: Path | None = None) -> list[str]:
        lines = [f"{'#' * level} {self.title}", "", markdown(self.frame, self.labels)]
        lines += [f"{note}\n" for note in self.notes]
        if base is not None:
            lines += [f"![{alt}]({relative(path, base)})\n" for alt, path in self.figures]
        return lines


def render(groups: Sequence[Sequence[Table]], level: int, base: Path | None = None) -> list[str]:
    """Markdown lines of table groups: each group's main table at heading ``level``, the
    details that follow it one level below; figures linked relative to ``base`` (none when
    ``None``)."""
    lines: list[str] = []
    for main, *details in groups:
        lines += main.render(level, base)
        for detail in details:
            lines += detail.render(level + 1, base)
    return lines


def relative(path: Path, base: Path) -> str:
    """``path`` as a link from a page in ``base``: the page renders wherever it is copied with
    the files it shows."""
    return os.path.relpath(path, base)


# ---- cells --------------------------------------------------------------------------------


def fmt(value: float) -> str:
    """A score x 100 (or an error rate in %) as the paper prints it; ``n/a`` where undefined."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.1f}"


def escape(text: str) -> str:
    """Free text in a table cell: a ``|`` would end the cell."""
    return text.replace("|", "\\|")


def with_text(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a ``text`` column: each value formatted for a table cell."""
    return frame.assign(text=frame["value"].map(fmt))


def labelled(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with cell ``text`` and a ``row`` label per :data:`ROW_LABELS`."""
    labels = [ROW_LABELS[k].format(m) for k, m in zip(frame["kind"], frame["model"], strict=True)]
    return with_text(frame).assign(row=labels)


def beside_floor(scores: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """The trained rows of ``scores`` with ``text`` = ``"79.9 (75.0)"``: the figure and, in
    brackets, the same cell of the model's floor (``–`` where the run has no floor for it)."""
    trained = select(scores, kind="trained")
    floor = select(scores, kind="floor")[[*keys, "value"]].rename(columns={"value": "floor"})
    merged = trained.merge(floor, on=list(keys), how="left")
    floor_text = merged["floor"].map(fmt).where(merged["floor"].notna(), MISSING)
    return merged.assign(text=merged["value"].map(fmt) + " (" + floor_text + ")")


def cells(scores: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """One ``text`` cell and ``row`` label per trained or peer score: where ``scores`` holds
    floors, the trained figures carry their floor's (:func:`beside_floor`) and the floor rows
    fold into them."""
    scores = labelled(scores)
    if select(scores, kind="floor").empty:
        return scores
    return pd.concat([beside_floor(scores, keys), select(scores, kind="peer")])


# ---- layout -------------------------------------------------------------------------------


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
