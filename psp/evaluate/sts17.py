"""SemEval-2017 Task 1 monolingual and cross-lingual STS (paper Table 3).

The mirror keeps each track's original column order, which is not always ``xx, en``: the
English sentence comes first in ar-en, es-en-WMT (4b) and tr-en, second in es-en (4a). The
evaluator knows each file's column languages so that a per-language embedder map (one model
per language) encodes every column with the right model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from psp.evaluate.base import (
    EmbedderOrMap,
    Evaluator,
    Row,
    correlations,
    embedder_for,
    encode,
    mean,
)
from psp.evaluate.readers import ScoredPairs, read_scored_pairs, require_dir
from psp.pooling import row_cosines

#: Language of (column 2, column 3) of each track file, as in the SemEval-2017 release.
STS17_COLUMNS: dict[str, tuple[str, str]] = {
    "ar-ar": ("ar", "ar"),
    "ar-en": ("en", "ar"),
    "es-es": ("es", "es"),
    "es-en": ("es", "en"),
    "es-en-WMT": ("en", "es"),
    "en-en": ("en", "en"),
    "tr-en": ("en", "tr"),
}
STS17_TRACKS = tuple(STS17_COLUMNS)


def check_tracks(tracks: Sequence[str], known: Mapping[str, tuple[str, str]]) -> None:
    """Reject a track whose column languages are unknown (before any file is opened)."""
    unknown = [track for track in tracks if track not in known]
    if unknown:
        raise ValueError(f"unknown STS17 track(s) {unknown}; known: {', '.join(known)}")


class Sts17Evaluator(Evaluator):
    """Pearson and Spearman x100 of cosine per STS17 track.

    ``model`` may be one embedder or a mapping language -> embedder. Keys:
    ``sts17_ar-en_pearson``, ``sts17_ar-en_spearman``..., ``sts17_avg_pearson`` (primary: mean
    over the evaluated tracks, also an ``avg`` row), ``sts17_avg_spearman``.

    Example:
        >>> ev = Sts17Evaluator.from_dir("/work/shared/data", tracks=["es-en", "es-es"])  # doctest: +SKIP
        >>> ev({"en": english_model, "es": spanish_model})  # doctest: +SKIP
    """

    columns = ("track", "lang1", "lang2", "n_pairs", "pearson", "spearman")
    table = "sts17"

    def __init__(
        self,
        tracks: Mapping[str, ScoredPairs],
        name: str = "sts17",
        column_languages: Mapping[str, tuple[str, str]] = STS17_COLUMNS,
    ):
        check_tracks(tracks, column_languages)
        if not tracks:
            raise ValueError("Sts17Evaluator needs at least one track")
        self.tracks = dict(tracks)
        self.column_languages = {track: column_languages[track] for track in self.tracks}
        self.name = name
        self.primary_metric = f"{name}_avg_pearson"

    @classmethod
    def from_dir(
        cls, data_root: str | os.PathLike, tracks: Sequence[str] = STS17_TRACKS, name: str = "sts17"
    ) -> Sts17Evaluator:
        """Read ``{data_root}/sts/sts17/{track}.tsv`` for each requested track."""
        check_tracks(tracks, STS17_COLUMNS)
        folder = require_dir(Path(data_root) / "sts" / "sts17", "STS17")
        return cls(
            {track: read_scored_pairs(folder / f"{track}.tsv") for track in tracks}, name=name
        )

    def compute(self, model: EmbedderOrMap) -> list[Row]:
        # Gather every column by language so each embedder runs once over its sentences.
        by_language: dict[str, list[str]] = {}
        for track, pairs in self.tracks.items():
            lang1, lang2 = self.column_languages[track]
            by_language.setdefault(lang1, []).extend(pairs.sent1)
            by_language.setdefault(lang2, []).extend(pairs.sent2)
        vectors = {
            lang: encode(embedder_for(model, lang), sentences)
            for lang, sentences in by_language.items()
        }
        cursor = dict.fromkeys(by_language, 0)

        def take(lang: str, n: int) -> np.ndarray:
            start = cursor[lang]
            cursor[lang] = start + n
            return vectors[lang][start : start + n]

        rows = []
        for track, pairs in self.tracks.items():
            lang1, lang2 = self.column_languages[track]
            a, b = take(lang1, len(pairs)), take(lang2, len(pairs))
            pearson, spearman = correlations(row_cosines(a, b), pairs.scores)
            rows.append(
                {
                    "track": track,
                    "lang1": lang1,
                    "lang2": lang2,
                    "n_pairs": len(pairs),
                    "pearson": pearson,
                    "spearman": spearman,
                }
            )
        averages = {column: mean(row[column] for row in rows) for column in ("pearson", "spearman")}
        n_pairs = sum(row["n_pairs"] for row in rows)
        return [*rows, {"track": "avg", "lang1": "", "lang2": "", "n_pairs": n_pairs, **averages}]

    def metrics(self, rows: list[Row]) -> dict[str, float]:
        out = {}
        for row in rows:
            out[f"{self.name}_{row['track']}_pearson"] = row["pearson"]
            out[f"{self.name}_{row['track']}_spearman"] = row["spearman"]
        return out
