"""Readers for the evaluation sets of the data mirror, with errors that name the file and line.

Evaluation numbers are only as good as the gold they are computed against, so a malformed row
(wrong column count, a score that is not a number or lies outside 0-5) stops the run instead of
being skipped silently.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from psp.io import InputError, iter_lines

SCORE_RANGE = (0.0, 5.0)


@dataclass(frozen=True)
class ScoredPairs:
    """Sentence pairs with gold similarity scores (one STS dataset, or several concatenated)."""

    sent1: list[str]
    sent2: list[str]
    scores: np.ndarray
    source: str

    def __len__(self) -> int:
        return len(self.scores)

    @classmethod
    def concat(cls, parts: list[ScoredPairs], source: str) -> ScoredPairs:
        return cls(
            sent1=[s for part in parts for s in part.sent1],
            sent2=[s for part in parts for s in part.sent2],
            scores=np.concatenate([part.scores for part in parts]),
            source=source,
        )


def read_scored_pairs(path: str | os.PathLike) -> ScoredPairs:
    """Read ``score<TAB>sent1<TAB>sent2`` rows (the mirror's STS layout).

    Raises:
        InputError: a row without exactly three columns, a non-numeric score, a score outside
            0-5, or a file without any row; the message is ``file:line: what``.
    """
    sent1: list[str] = []
    sent2: list[str] = []
    scores: list[float] = []
    low, high = SCORE_RANGE
    for lineno, line in iter_lines(path):
        columns = line.split("\t")
        if len(columns) != 3:
            raise InputError(
                f"{path}:{lineno}: expected 3 tab-separated columns (score, sent1, sent2), "
                f"found {len(columns)}"
            )
        try:
            score = float(columns[0])
        except ValueError:
            raise InputError(f"{path}:{lineno}: score {columns[0]!r} is not a number") from None
        if not (low <= score <= high) or math.isnan(score):
            raise InputError(f"{path}:{lineno}: score {score:g} outside {low:g}-{high:g}")
        scores.append(score)
        sent1.append(columns[1])
        sent2.append(columns[2])
    if not scores:
        raise InputError(f"{path}: no scored pairs")
    return ScoredPairs(sent1, sent2, np.asarray(scores, dtype=np.float64), str(path))


def read_aligned(
    path_a: str | os.PathLike, path_b: str | os.PathLike
) -> tuple[list[str], list[str]]:
    """Read two line-aligned files (a Tatoeba language file and its English side).

    Raises:
        InputError: the files differ in length; the message names the shorter file and the
            first line it lacks, and both line counts.
    """
    lines_a = [text for _, text in iter_lines(path_a)]
    lines_b = [text for _, text in iter_lines(path_b)]
    if len(lines_a) != len(lines_b):
        short, n_short, n_long, long_ = (
            (path_a, len(lines_a), len(lines_b), path_b)
            if len(lines_a) < len(lines_b)
            else (path_b, len(lines_b), len(lines_a), path_a)
        )
        raise InputError(
            f"{short}:{n_short + 1}: missing line; the file has {n_short} lines but its "
            f"line-aligned partner {long_} has {n_long}"
        )
    if not lines_a:
        raise InputError(f"{path_a}: no lines")
    return lines_a, lines_b


def require_dir(path: Path, what: str) -> Path:
    """Fail early with the expected mirror location when an evaluation folder is missing."""
    if not path.is_dir():
        raise FileNotFoundError(
            f"{what} not found: {path} (see the data mirror layout in SOURCES.md)"
        )
    return path
