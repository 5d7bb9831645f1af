"""Write mined pairs: the pairs above the threshold that pass the pair filters, sorted by
score (``score<TAB>src<TAB>tgt``, or Parquet, see :mod:`psp.mine.mined_table`), ``stats.json``
and a histogram.

Only the lines that appear in pairs above the threshold are read back from the corpora (one
streaming pass per side, and one per side's origins file for provenance), so writing the output
does not need the corpora in memory.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from psp.io import InputError, atomic_open, atomic_path, iter_lines
from psp.mine.config import MineConfig
from psp.mine.index import KNN
from psp.mine.margin import score_pairs
from psp.mine.mined_table import Format, MinedTable, provenance_columns, write_table
from psp.mine.pair_filters import KEPT, filter_reasons, removed_counts

log = logging.getLogger(__name__)

QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)


def gather_lines(path: str | os.PathLike, wanted: np.ndarray, n_expected: int) -> dict[int, str]:
    """Lines ``wanted`` (0-based) of ``path``, checking the file has exactly ``n_expected`` lines."""
    wanted_set = set(np.asarray(wanted).tolist())
    found, n = {}, 0
    for n, text in iter_lines(path):
        if n - 1 in wanted_set:
            found[n - 1] = text.replace("\t", " ")
    if n != n_expected:
        raise InputError(f"{path}: has {n} lines but the embeddings have {n_expected} rows")
    return found


@dataclass(frozen=True)
class Origins:
    """Where each row of the two sides came from: the origins files written beside the sharded
    texts (:func:`psp.mine.plan.shard_text_file`: ``line doc_id`` per row), and whether each
    side's input gave document ids."""

    src: Path
    tgt: Path
    with_ids: tuple[bool, bool] = (False, False)


def gather_origins(path, wanted: np.ndarray, n_expected: int) -> dict[int, tuple[int, str]]:
    """``(input line, document id)`` of the rows ``wanted`` of an origins file."""
    return {
        row: (int(number), doc_id)
        for row, (number, _, doc_id) in (
            (row, line.partition(" "))
            for row, line in gather_lines(path, wanted, n_expected).items()
        )
    }


def quantiles(values: np.ndarray) -> dict[str, float]:
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return {}
    return {
        f"q{int(q * 100):02d}": float(v)
        for q, v in zip(QUANTILES, np.quantile(finite, QUANTILES), strict=True)
    }


def write_mined(
    src_text: str | os.PathLike,
    tgt_text: str | os.PathLike,
    *,
    fwd: KNN,
    bwd: KNN,
    cfg: MineConfig,
    out_path: str | os.PathLike,
    stats_json: str | os.PathLike,
    histogram_png: str | os.PathLike | None = None,
    timings: dict[str, float] | None = None,
    inputs: dict | None = None,
    threshold_source: dict | None = None,
    languages: tuple[str, str] | None = None,
    origins: Origins | None = None,
    out_format: Format = "tsv",
) -> dict:
    """Score candidates, apply retrieval, threshold and the pair filters, and write the three
    outputs atomically.

    Args:
        src_text, tgt_text: the corpora the embeddings were computed from (line i = row i).
        fwd, bwd: global kNN lists (``reduce_parts`` / ``load_knn``).
        cfg: k, margin, retrieval and threshold.
        timings: seconds per earlier stage, copied into ``stats.json``.
        inputs: what ``stats.json`` says about the inputs, when the texts are a prepared copy of
            them (the input files, the blank lines left out); by default, the texts' names.
        threshold_source: where ``cfg.threshold`` came from (``psp.mine.bucc.mining_threshold``);
            by default the config, or the margin's default when ``cfg.threshold`` is None.
        languages: the pair's (source, target) languages, for the language check and length
            factors of the pair filters (``cfg.filters``).
        origins: the sides' origins files, for provenance columns; ``None``: none.
        out_format: ``tsv`` or ``parquet`` (:mod:`psp.mine.mined_table`).

    Returns the stats dict written to ``stats_json``.
    """
    t0 = time.perf_counter()
    scores, src, tgt = score_pairs(
        fwd, bwd, k=cfg.k, margin_kind=cfg.margin, retrieval=cfg.retrieval
    )
    threshold = cfg.effective_threshold
    above = np.flatnonzero(scores >= threshold)
    table, reasons = _filtered_table(
        (scores[above], src[above], tgt[above]),
        texts=(src_text, tgt_text),
        sizes=(len(fwd[0]), len(bwd[0])),
        cfg=cfg,
        languages=languages,
        origins=origins,
    )
    write_table(table, out_path, out_format)
    keep = np.zeros(len(scores), dtype=bool)
    keep[above[reasons == KEPT]] = True
    stats = {
        **(inputs or {"src_file": str(src_text), "tgt_file": str(tgt_text)}),
        "n_src": len(fwd[0]),
        "n_tgt": len(bwd[0]),
        "k": cfg.k,
        "margin": cfg.margin,
        "retrieval": cfg.retrieval,
        "threshold": threshold,
        "threshold_source": threshold_source
        or {"from": "default" if cfg.threshold is None else "config"},
        "above_threshold": len(above),
        "filters": cfg.filters.to_dict(),
        "languages": list(languages) if languages else None,
        "removed": removed_counts(reasons),
        **_score_summary(scores, keep, n_src=len(fwd[0])),
        "format": out_format,
        "columns": table.columns,
        "timings_s": {**(timings or {}), "score_and_write": time.perf_counter() - t0},
    }
    with atomic_open(stats_json, "wt") as out:
        json.dump(stats, out, indent=2)
    if histogram_png is not None:
        plot_histogram(scores, threshold, stats, histogram_png)
    log.info(
        "mined %d of %d candidates at %s >= %g", stats["kept"], len(scores), cfg.margin, threshold
    )
    return stats


def _score_summary(scores: np.ndarray, keep: np.ndarray, *, n_src: int) -> dict:
    """How many candidates were kept, and the score quantiles before and after the threshold."""
    return {
        "candidates": len(scores),
        "kept": int(keep.sum()),
        "kept_fraction_of_src": float(keep.sum() / max(n_src, 1)),
        "score_quantiles_candidates": quantiles(scores),
        "score_quantiles_kept": quantiles(scores[keep]),
    }


def _filtered_table(
    above: tuple[np.ndarray, np.ndarray, np.ndarray],
    *,
    texts: tuple[str | os.PathLike, str | os.PathLike],
    sizes: tuple[int, int],
    cfg: MineConfig,
    languages: tuple[str, str] | None,
    origins: Origins | None,
) -> tuple[MinedTable, np.ndarray]:
    """The pairs ``(scores, src rows, tgt rows)`` above the threshold that pass the pair
    filters, as a table in that order, and every pair's filter reason (``KEPT`` or an index of
    :data:`psp.mine.pair_filters.REASONS`).

    Only these pairs' lines of each text are held in memory (``gather_lines``); ``sizes`` are
    the embeddings' row counts, which each text's line count must equal.
    """
    scores, src, tgt = above
    src_lines = gather_lines(texts[0], src, sizes[0])
    tgt_lines = gather_lines(texts[1], tgt, sizes[1])
    src_texts = [src_lines[i] for i in src.tolist()]
    tgt_texts = [tgt_lines[j] for j in tgt.tolist()]
    reasons = filter_reasons(scores, src_texts, tgt_texts, cfg.filters, languages)
    keep = np.flatnonzero(reasons == KEPT)
    table = MinedTable(
        scores[keep],
        [src_texts[i] for i in keep.tolist()],
        [tgt_texts[i] for i in keep.tolist()],
    )
    if origins is not None:
        table.provenance = _provenance(origins, (src[keep], tgt[keep]), sizes)
    return table, reasons


def _provenance(origins: Origins, rows: tuple[np.ndarray, np.ndarray], sizes) -> dict[str, list]:
    """The provenance columns of the pairs whose side rows are ``rows``."""
    found = {}
    for side, path, side_rows, size in zip(
        ("src", "tgt"), (origins.src, origins.tgt), rows, sizes, strict=True
    ):
        where = gather_origins(path, side_rows, size)
        found[f"{side}_line"] = [where[i][0] for i in side_rows.tolist()]
        found[f"{side}_id"] = [where[i][1] for i in side_rows.tolist()]
    return {name: found[name] for name in provenance_columns(origins.with_ids)}


def plot_histogram(
    scores: np.ndarray, threshold: float, stats: dict, out_png: str | os.PathLike
) -> Path:
    """Histogram of candidate scores with the threshold marked (log counts: the tail matters)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    finite = scores[np.isfinite(scores)]
    if len(finite):
        ax.hist(finite, bins=100, color="#4C72B0", log=True)
    # A threshold far outside the scores (e.g. -inf to keep everything) would squash the bars.
    if len(finite) and finite.min() <= threshold <= finite.max():
        ax.axvline(threshold, color="#C44E52", linestyle="--", label=f"threshold {threshold:g}")
        ax.legend()
    ax.set_xlabel(f"{stats['margin']} margin score")
    ax.set_ylabel("candidate pairs (log)")
    ax.set_title(
        f"{Path(out_png).name.split('.')[0]}: kept {stats['kept']:,} of {stats['candidates']:,} at >= {threshold:g} "
        f"({stats['retrieval']}, k={stats['k']})",
        fontsize=9,
    )
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return Path(out_png)
