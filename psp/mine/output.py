"""Write mined pairs: ``score<TAB>src<TAB>tgt`` sorted by score, ``stats.json`` and a histogram.

Only the lines that appear in kept pairs are read back from the corpora (one streaming pass per
side), so writing the output does not need the corpora in memory.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np

from psp.io import InputError, atomic_open, atomic_path, iter_lines
from psp.mine.config import MineConfig
from psp.mine.index import KNN
from psp.mine.margin import score_pairs

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
    out_tsv_gz: str | os.PathLike,
    stats_json: str | os.PathLike,
    histogram_png: str | os.PathLike | None = None,
    timings: dict[str, float] | None = None,
    inputs: dict | None = None,
    threshold_source: dict | None = None,
) -> dict:
    """Score candidates, apply retrieval and threshold, and write the three outputs atomically.

    Args:
        src_text, tgt_text: the corpora the embeddings were computed from (line i = row i).
        fwd, bwd: global kNN lists (``reduce_parts`` / ``load_knn``).
        cfg: k, margin, retrieval and threshold.
        timings: seconds per earlier stage, copied into ``stats.json``.
        inputs: what ``stats.json`` says about the inputs, when the texts are a prepared copy of
            them (the input files, the blank lines left out); by default, the texts' names.
        threshold_source: where ``cfg.threshold`` came from (``psp.mine.bucc.mining_threshold``);
            by default the config, or the margin's default when ``cfg.threshold`` is None.

    Returns the stats dict written to ``stats_json``.
    """
    t0 = time.perf_counter()
    scores, src, tgt = score_pairs(
        fwd, bwd, k=cfg.k, margin_kind=cfg.margin, retrieval=cfg.retrieval
    )
    threshold = cfg.effective_threshold
    keep = scores >= threshold
    kept = scores[keep], src[keep], tgt[keep]
    _write_kept(out_tsv_gz, kept, texts=(src_text, tgt_text), sizes=(len(fwd[0]), len(bwd[0])))
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
        **_score_summary(scores, keep, n_src=len(fwd[0])),
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


def _write_kept(
    out_tsv_gz: str | os.PathLike,
    kept: tuple[np.ndarray, np.ndarray, np.ndarray],
    *,
    texts: tuple[str | os.PathLike, str | os.PathLike],
    sizes: tuple[int, int],
) -> None:
    """``score<TAB>src<TAB>tgt`` lines for the ``(scores, src rows, tgt rows)`` kept, in that order.

    Only the kept lines of each text are held in memory (``gather_lines``); ``sizes`` are the
    embeddings' row counts, which each text's line count must equal.
    """
    scores, src, tgt = kept
    src_lines = gather_lines(texts[0], src, sizes[0])
    tgt_lines = gather_lines(texts[1], tgt, sizes[1])
    with atomic_open(out_tsv_gz, "wt") as out:
        for score, i, j in zip(scores.tolist(), src.tolist(), tgt.tolist(), strict=True):
            out.write(f"{score:.4f}\t{src_lines[i]}\t{tgt_lines[j]}\n")


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
