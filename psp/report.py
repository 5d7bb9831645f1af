"""``results/report.md``: every model, its untrained floor and the peers side by side, with the
training curves, data-stage counts, mining results and the BUCC-style mining evaluation.

The report only reads what earlier rules wrote; it computes no metric itself. Paths inside it
are relative to the report's folder so the Markdown renders wherever ``results/`` is copied.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
from collections.abc import Sequence
from pathlib import Path

from psp.evaluate.tables import combine_tables
from psp.io import atomic_open

TOP_PAIRS = 10


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _eval_section(
    evals: Sequence[Path], floors: Sequence[Path], peers: Sequence[Path]
) -> list[str]:
    dirs = {f"P-SP {p.parent.name}": p.parent for p in evals}
    dirs |= {f"untrained {p.parent.name} (floor)": p.parent for p in floors}
    dirs |= {f"peer {p.parent.name}": p.parent for p in peers}
    return [
        "## Evaluation",
        "",
        "Every number below was computed by `psp.evaluate` from each embedder's own `embed`. "
        "The untrained rows use random piece embeddings over the same SentencePiece model: "
        "the floor a trained model must clear.",
        "",
        combine_tables(dirs),
    ]


def _train_section(train_logs: Sequence[Path], base: Path) -> list[str]:
    lines = ["## Training", ""]
    for log_path in train_logs:
        model = log_path.parent.name
        with open(log_path, newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        steps = [r for r in rows if r.get("event") == "step" and r.get("pairs_per_s")]
        epochs = [r for r in rows if r.get("event") == "epoch"]
        lines.append(f"### {model}")
        lines.append("")
        if steps:
            speed = sorted(float(r["pairs_per_s"]) for r in steps)[len(steps) // 2]
            lines.append(
                f"{len(epochs)} epochs, {steps[-1]['step']} steps, median {speed:,.0f} pairs/s, "
                f"final loss {float(steps[-1]['loss']):.4f}."
            )
            lines.append("")
        data_stats = base / "data" / model / "filter_stats.json"
        if data_stats.exists():
            stats = _json(data_stats)
            removed = ", ".join(f"{k} {v:,}" for k, v in stats["removed"].items() if v)
            lines.append(
                f"Data: {stats['kept']:,} of {stats['lines_in']:,} pairs kept ({removed})."
            )
            lines.append("")
        lines.append(
            f"![learning curve of {model}]({_rel(log_path.parent / 'learning_curve.png', base)})"
        )
        lines.append("")
    return lines


def _top_pairs(path: Path, n: int) -> list[str]:
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for _, line in zip(range(n), handle, strict=False):
            score, src, tgt = line.rstrip("\n").split("\t")
            rows.append(f"| {score} | {src[:160]} | {tgt[:160]} |")
    return rows


def _mine_section(mined: Sequence[Path], base: Path) -> list[str]:
    lines = ["## Mining", ""]
    for stats_path in mined:
        stats = _json(stats_path)
        pair = stats_path.name.removesuffix(".stats.json")
        lines += [
            f"### {pair} ({stats_path.parent.name} model)",
            "",
            f"{stats['n_src']:,} source and {stats['n_tgt']:,} target sentences, k={stats['k']}, "
            f"{stats['margin']} margin, {stats['retrieval']} retrieval: {stats['kept']:,} pairs "
            f"at score ≥ {stats['threshold']:g} (of {stats['candidates']:,} candidates).",
            "",
            f"![score histogram of {pair}]({_rel(stats_path.with_name(pair + '.histogram.png'), base)})",
            "",
            f"Top {TOP_PAIRS} pairs:",
            "",
            "| score | source | target |",
            "|---|---|---|",
            *_top_pairs(stats_path.with_name(pair + ".tsv.gz"), TOP_PAIRS),
            "",
        ]
    return lines


def _bucc_section(bucc: Sequence[Path], base: Path) -> list[str]:
    lines = [
        "## Mining quality (BUCC-style)",
        "",
        "Gold translation pairs hidden among unrelated sentences on both sides; the threshold "
        "maximises F1 on the dev task and is applied unchanged to the test task.",
        "",
        "| pair | split | threshold | precision | recall | F1 | source / target sentences |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in bucc:
        results = _json(path)
        for split in ("dev", "test"):
            r = results[split]
            lines.append(
                f"| {path.parent.name} | {split} | {r['threshold']:.4f} | {100 * r['precision']:.1f} "
                f"| {100 * r['recall']:.1f} | {100 * r['f1']:.1f} | {r['n_src']:,} / {r['n_tgt']:,} |"
            )
    lines.append("")
    for path in bucc:
        lines += [
            f"![precision-recall of {path.parent.name}]({_rel(path.with_name('pr_curve.png'), base)})",
            "",
        ]
    return lines


def write_report(
    out_path: str | os.PathLike,
    evals: Sequence[str | os.PathLike],
    floors: Sequence[str | os.PathLike] = (),
    peers: Sequence[str | os.PathLike] = (),
    train_logs: Sequence[str | os.PathLike] = (),
    mined: Sequence[str | os.PathLike] = (),
    bucc: Sequence[str | os.PathLike] = (),
) -> Path:
    """Gather the run's outputs (paths as the workflow names them) into one Markdown report."""
    out_path = Path(out_path)
    base = out_path.parent
    as_paths = lambda items: [Path(p) for p in items]  # noqa: E731
    sections = ["# psp-mine report", ""]
    sections += _eval_section(as_paths(evals), as_paths(floors), as_paths(peers))
    if train_logs:
        sections += _train_section(as_paths(train_logs), base)
    if mined:
        sections += _mine_section(as_paths(mined), base)
    if bucc:
        sections += _bucc_section(as_paths(bucc), base)
    with atomic_open(out_path, "wt") as handle:
        handle.write("\n".join(sections) + "\n")
    return out_path
