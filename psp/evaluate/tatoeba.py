"""Tatoeba bitext retrieval (paper Table 4), as in LASER's similarity-search test.

For each sentence of one side, the nearest sentence of the other side by cosine must be its
translation (same line); the error rate is the share of misses, in %, in both directions
(xx->en: queries in the foreign language, en->xx: English queries) and their mean.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from psp.evaluate.base import EmbedderOrMap, Evaluator, Row, embedder_for, encode, mean
from psp.evaluate.readers import read_aligned, require_dir
from psp.model.pooling import normalize_rows

#: ISO 639-1 code -> Tatoeba (ISO 639-3 as used by the LASER test set) for the paper's languages
#: and a few neighbours. Languages without an ISO 639-1 code are given by their Tatoeba code.
TATOEBA_CODES: dict[str, str] = {
    "ar": "ara",
    "de": "deu",
    "es": "spa",
    "fr": "fra",
    "ru": "rus",
    "tr": "tur",
    "zh": "cmn",
    "it": "ita",
    "pt": "por",
    "nl": "nld",
    "ja": "jpn",
    "ko": "kor",
    "hi": "hin",
}
ERROR_COLUMNS = ("xx2en_error", "en2xx_error", "mean_error")
TATOEBA_LANGUAGES = ("ar", "de", "es", "fr", "ru", "tr", "zh")
_ISO_OF = {code: iso for iso, code in TATOEBA_CODES.items()}


def tatoeba_code(language: str) -> tuple[str, str]:
    """``(language, tatoeba_code)`` for an ISO 639-1 code (``"es"``) or a Tatoeba code (``"spa"``).

    ``language`` is the ISO 639-1 code where one is known: it is the key of a per-language
    embedder map, shared with STS17.
    """
    if language in TATOEBA_CODES:
        return language, TATOEBA_CODES[language]
    return _ISO_OF.get(language, language), language


def retrieval_errors(queries: np.ndarray, targets: np.ndarray) -> tuple[float, float]:
    """Error rates (%) of nearest-neighbour retrieval, queries->targets and targets->queries.

    Row i of ``queries`` and row i of ``targets`` are translations; a tie goes to the lowest
    index, like a flat Faiss search.
    """
    similarity = normalize_rows(queries) @ normalize_rows(targets).T
    expected = np.arange(len(queries))
    forward = np.mean(similarity.argmax(axis=1) != expected)
    backward = np.mean(similarity.argmax(axis=0) != expected)
    return 100 * float(forward), 100 * float(backward)


class TatoebaEvaluator(Evaluator):
    """Tatoeba error rates per language; lower is better.

    Keys ``tatoeba_spa_xx2en_error``, ``tatoeba_spa_en2xx_error``, ``tatoeba_spa_error`` (their
    mean) and ``tatoeba_avg_error`` (primary: mean over languages, also an ``avg`` row).

    Example:
        >>> ev = TatoebaEvaluator.from_dir("/work/shared/data", languages=["es", "fr"])  # doctest: +SKIP
        >>> ev(model)["tatoeba_spa_error"]  # doctest: +SKIP
    """

    columns = ("language", "code", "n_pairs", *ERROR_COLUMNS)
    table = "tatoeba"
    greater_is_better = False

    def __init__(self, pairs: Mapping[str, tuple[list[str], list[str]]], name: str = "tatoeba"):
        """``pairs`` maps a language (ISO 639-1 or Tatoeba code) to (xx sentences, English)."""
        if not pairs:
            raise ValueError("TatoebaEvaluator needs at least one language")
        self.pairs = {tatoeba_code(language): sides for language, sides in pairs.items()}
        self.name = name
        self.primary_metric = f"{name}_avg_error"

    @classmethod
    def from_dir(
        cls,
        data_root: str | os.PathLike,
        languages: Sequence[str] = TATOEBA_LANGUAGES,
        name: str = "tatoeba",
    ) -> TatoebaEvaluator:
        """Read ``{data_root}/tatoeba/tatoeba.{code}-eng.{code,eng}`` for each language."""
        folder = require_dir(Path(data_root) / "tatoeba", "Tatoeba")
        pairs = {}
        for language in languages:
            _, code = tatoeba_code(language)
            foreign, english = (
                folder / f"tatoeba.{code}-eng.{code}",
                folder / f"tatoeba.{code}-eng.eng",
            )
            if not foreign.is_file():
                raise FileNotFoundError(
                    f"no Tatoeba test for language {language!r}: {foreign} not found"
                )
            pairs[language] = read_aligned(foreign, english)
        return cls(pairs, name=name)

    def compute(self, model: EmbedderOrMap) -> list[Row]:
        rows = []
        for (language, code), (foreign, english) in self.pairs.items():
            xx = encode(embedder_for(model, language), foreign)
            en = encode(embedder_for(model, "en"), english)
            xx2en, en2xx = retrieval_errors(xx, en)
            rows.append(
                {
                    "language": language,
                    "code": code,
                    "n_pairs": len(foreign),
                    "xx2en_error": xx2en,
                    "en2xx_error": en2xx,
                    "mean_error": (xx2en + en2xx) / 2,
                }
            )
        averages = {column: mean(row[column] for row in rows) for column in ERROR_COLUMNS}
        n_pairs = sum(row["n_pairs"] for row in rows)
        return [*rows, {"language": "avg", "code": "avg", "n_pairs": n_pairs, **averages}]

    def metrics(self, rows: list[Row]) -> dict[str, float]:
        out = {}
        for row in rows:
            prefix = f"{self.name}_{row['code']}"
            out[f"{prefix}_xx2en_error"] = row["xx2en_error"]
            out[f"{prefix}_en2xx_error"] = row["en2xx_error"]
            out[f"{prefix}_error"] = row["mean_error"]
        return out
