"""The report's sections that show what other rules drew: learning curves per model, score
histograms and the top mined pairs per language pair.

Sections link pictures relative to the report's folder, so the report renders wherever
``results/`` is copied.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from psp.evaluate.tables import escape, markdown, relative
from psp.report.run_tables import read_json

TOP_PAIRS = 10


def training_section(train_logs: Sequence[Path], base: Path) -> list[str]:
    """Per model: epochs, steps, median pairs/s, final loss and its learning curve."""
    lines = ["## Training", ""]
    for log_path in train_logs:
        model = log_path.parent.name
        log = pd.read_csv(log_path, sep="\t")
        steps = log[(log["event"] == "step") & log["pairs_per_s"].notna()]
        lines += [f"### {model}", ""]
        if not steps.empty:
            epochs = int((log["event"] == "epoch").sum())
            lines += [
                f"{epochs} epochs, {steps['step'].iloc[-1]} steps, median "
                f"{steps['pairs_per_s'].median():,.0f} pairs/s, final loss "
                f"{float(steps['loss'].iloc[-1]):.4f}.",
                "",
            ]
        curve = relative(log_path.parent / "learning_curve.png", base)
        lines += [f"![learning curve of {model}]({curve})", ""]
    return lines


def top_pairs(path: Path, n: int) -> pd.DataFrame:
    """The first ``n`` lines of a mined file (the best scores), sentences cut to 160 chars."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [line.rstrip("\n").split("\t") for _, line in zip(range(n), handle, strict=False)]
    frame = pd.DataFrame(rows, columns=["score", "source", "target"])
    return frame.assign(
        source=frame["source"].str[:160].map(escape), target=frame["target"].str[:160].map(escape)
    )


def mining_section(mined: Sequence[Path], base: Path) -> list[str]:
    """Per mined pair: its counts and settings, the score histogram and the top pairs."""
    lines = ["## Mining", ""]
    for stats_path in mined:
        stats = read_json(stats_path)
        pair = stats_path.name.removesuffix(".stats.json")
        histogram = relative(stats_path.with_name(pair + ".histogram.png"), base)
        lines += [
            f"### {pair} ({stats_path.parent.name} model)",
            "",
            f"{stats['n_src']:,} source and {stats['n_tgt']:,} target sentences, k={stats['k']}, "
            f"{stats['margin']} margin, {stats['retrieval']} retrieval: {stats['kept']:,} pairs "
            f"at score ≥ {stats['threshold']:g} (of {stats['candidates']:,} candidates).",
            "",
            f"![score histogram of {pair}]({histogram})",
            "",
            f"Top {TOP_PAIRS} pairs:",
            "",
            markdown(top_pairs(stats_path.with_name(pair + ".tsv.gz"), TOP_PAIRS), labels=3),
        ]
    return lines
