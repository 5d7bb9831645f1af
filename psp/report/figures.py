"""The report's figures: the speed-quality plot of Table 5 (drawn by the ``speed`` rule), and
the sections that show what other rules drew: learning curves per model, score histograms and
the top mined pairs per language pair.

Sections link pictures relative to the report's folder, so the report renders wherever
``results/`` is copied.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from psp.evaluate.markdown import escape, markdown, relative
from psp.io import atomic_path
from psp.report.stage_tables import read_json

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


def filtered_out(stats: dict) -> str:
    """What the pair filters removed of the pairs above the threshold, in words ("" for a
    stats file without them)."""
    removed = {reason: n for reason, n in stats.get("removed", {}).items() if n}
    if "above_threshold" not in stats:
        return ""
    counts = ", ".join(f"{reason} {n:,}" for reason, n in removed.items()) or "none"
    return (
        f", after the pair filters removed of the {stats['above_threshold']:,} above it: {counts}"
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
            f"at score ≥ {stats['threshold']:g} (of {stats['candidates']:,} candidates)"
            + filtered_out(stats)
            + ".",
            "",
            f"![score histogram of {pair}]({histogram})",
            "",
            f"Top {TOP_PAIRS} pairs:",
            "",
            markdown(top_pairs(stats_path.with_name(pair + ".tsv.gz"), TOP_PAIRS), labels=3),
        ]
    return lines


def plot_speed_quality(rows: Sequence[dict], path: str | os.PathLike) -> None:
    """Sentences/s (log x) against STS average (y), marker area by peak memory, one labelled
    point per encoder and thread setting. Encoders without an STS average go on a strip of
    their own below, so they are shown without inventing a score. Rows may be read back from
    the CSV (strings)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    unscored = [row for row in rows if row["sts_avg"] == ""]
    if unscored:
        fig, (ax, strip) = plt.subplots(
            2, 1, figsize=(9, 7), sharex=True, gridspec_kw={"height_ratios": [4, 1]}
        )
        strip.set_yticks([])
        strip.set_ylabel("no STS\nscore")
        strip.set_xlabel("sentences / s (log scale)")
        strip.margins(y=1.5)
    else:
        fig, ax = plt.subplots(figsize=(9, 6))
        ax.set_xlabel("sentences / s (log scale)")
    scale = 800 / max((float(r["peak_rss_mib"]) for r in rows), default=1)
    for row in rows:
        mib = float(row["peak_rss_mib"])
        x, size = float(row["sentences_per_s"]), 40 + mib * scale
        color = "tab:blue" if row["kind"] == "psp" else "tab:orange"
        target, y = (strip, 0.0) if row["sts_avg"] == "" else (ax, float(row["sts_avg"]))
        target.scatter(x, y, s=size, color=color, alpha=0.6, edgecolors=color)
        # One thread's label above the marker, more threads' below: the settings of one
        # encoder often land on top of each other.
        above = int(row["threads"]) == 1
        radius = size**0.5 / 2 + 2
        target.annotate(
            f"{row['encoder']} ({row['threads']}t, {mib:.0f} MiB)",
            (x, y),
            xytext=(0, radius if above else -radius),
            textcoords="offset points",
            fontsize=7,
            ha="center",
            va="bottom" if above else "top",
        )
    ax.set_xscale("log")
    ax.margins(x=0.25, y=0.2)
    ax.set_ylabel("STS 2012-16 average (Pearson r x 100)")
    n = int(rows[0]["sentences"]) if rows else 0
    ax.set_title(f"Speed and quality ({n:,} news sentences; marker area: peak RSS)")
    for axis in fig.axes:
        axis.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
