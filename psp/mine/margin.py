"""Margin scores (Artetxe & Schwenk, 2019) and candidate retrieval from two-way kNN lists.

For a candidate pair (x, y) with cosine c, let m_x be the mean cosine of x's k nearest targets
and m_y the mean cosine of y's k nearest sources. Then

- ``ratio``:    c / ((m_x + m_y) / 2)   (the paper's choice; = c / Σ cos/2k over both lists)
- ``distance``: c - (m_x + m_y) / 2
- ``absolute``: c

Dividing by the neighbourhood density penalises "hub" sentences that are close to everything,
which raw cosine does not. The ratio is only defined for a positive density: a candidate whose
two neighbourhoods have a mean cosine of 0 or less (a sentence no closer to its neighbours than
to noise, such as an empty one embedded as a zero vector) scores ``-inf``, so it is never kept,
instead of being inflated without bound by a tiny or negative denominator. Candidates are the k neighbours already found; their cosine is read
from the kNN lists, so no embedding is touched again here.
"""

from __future__ import annotations

import numpy as np

from psp.mine.config import Margin, Retrieval
from psp.mine.index import KNN


def knn_means(knn: KNN, k: int) -> np.ndarray:
    """Mean cosine of each row's (up to) ``k`` nearest neighbours; 0 for a row with none."""
    dist, ids = knn
    valid = ids[:, :k] >= 0
    total = np.where(valid, dist[:, :k], 0.0).sum(axis=1, dtype=np.float64)
    return (total / np.maximum(valid.sum(axis=1), 1)).astype(np.float32)


def margin_score(
    cos: np.ndarray, mean_x: np.ndarray, mean_y: np.ndarray, kind: Margin
) -> np.ndarray:
    """Score candidate cosines given the two neighbourhood means (arrays broadcast)."""
    denom = (mean_x + mean_y) / 2
    if kind == "ratio":
        defined = denom > 0
        return np.where(defined, cos / np.where(defined, denom, 1), -np.inf).astype(np.float32)
    if kind == "distance":
        return cos - denom
    if kind == "absolute":
        return np.asarray(cos, dtype=np.float32)
    raise ValueError(f"unknown margin {kind!r}")


def _best(knn: KNN, mean_self: np.ndarray, mean_other: np.ndarray, *, k: int, kind: Margin):
    """For each row: the best-scoring of its candidates → (score, candidate id); -inf/-1 if none."""
    dist, ids = knn[0][:, :k], knn[1][:, :k]
    valid = ids >= 0
    scores = margin_score(dist, mean_self[:, None], mean_other[np.where(valid, ids, 0)], kind)
    scores = np.where(valid, scores, -np.inf)
    pos = scores.argmax(axis=1)
    rows = np.arange(len(dist))
    return scores[rows, pos].astype(np.float32), np.where(valid[rows, pos], ids[rows, pos], -1)


def score_pairs(
    fwd: KNN, bwd: KNN, *, k: int = 4, margin_kind: Margin = "ratio", retrieval: Retrieval = "max"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate pairs and their margin scores, sorted by score descending (no threshold).

    Args:
        fwd: ``(dist, ids)`` of each source row's nearest targets (global ids); bwd: the reverse.
        retrieval: ``fwd`` best target per source; ``bwd`` best source per target; ``intersect``
            pairs that are each other's best; ``max`` the union of fwd and bwd taken greedily by
            score so that each source and each target appears at most once (LASER mine_bitexts).

    Returns ``(scores float32, src_ids int64, tgt_ids int64)``.
    """
    mean_src, mean_tgt = knn_means(fwd, k), knn_means(bwd, k)
    f_score, f_tgt = _best(fwd, mean_src, mean_tgt, k=k, kind=margin_kind)
    b_score, b_src = _best(bwd, mean_tgt, mean_src, k=k, kind=margin_kind)
    src_ids, tgt_ids = np.arange(len(f_tgt)), np.arange(len(b_src))
    if retrieval == "fwd":
        scores, src, tgt = f_score, src_ids, f_tgt
    elif retrieval == "bwd":
        scores, src, tgt = b_score, b_src, tgt_ids
    elif retrieval == "intersect":
        mutual = (f_tgt >= 0) & (b_src[np.maximum(f_tgt, 0)] == src_ids)
        scores, src, tgt = f_score[mutual], src_ids[mutual], f_tgt[mutual]
    elif retrieval == "max":
        scores = np.concatenate([f_score, b_score])
        src = np.concatenate([src_ids, b_src])
        tgt = np.concatenate([f_tgt, tgt_ids])
    else:
        raise ValueError(f"unknown retrieval {retrieval!r}")
    keep = (src >= 0) & (tgt >= 0)
    scores, src, tgt = scores[keep], src[keep], tgt[keep]
    order = np.argsort(-scores, kind="stable")
    scores, src, tgt = scores[order], src[order].astype(np.int64), tgt[order].astype(np.int64)
    if retrieval == "max":
        first = _greedy_one_to_one(src, tgt)
        scores, src, tgt = scores[first], src[first], tgt[first]
    return scores, src, tgt


def _greedy_one_to_one(src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """Indices of pairs (already sorted by score) whose source and target were both unused."""
    seen_src, seen_tgt, keep = set(), set(), []
    for idx, (s, t) in enumerate(zip(src.tolist(), tgt.tolist(), strict=True)):
        if s not in seen_src and t not in seen_tgt:
            seen_src.add(s)
            seen_tgt.add(t)
            keep.append(idx)
    return np.asarray(keep, dtype=np.int64)
