"""Semantic textual similarity: SemEval STS 2012-2016 and STS Benchmark (paper Table 2), and
SemEval-2017 Task 1's monolingual and cross-lingual tracks (paper Table 3).

Scores are the cosine similarity of the two sentence embeddings, compared with the gold
scores by correlation x100. For English STS two conventions are reported side by side because
the literature uses both: the paper's (Pearson r per dataset, averaged within each year, then
over the years) and Sentence-BERT's (Spearman rho over the concatenation of a year's datasets,
labelled ``all``).

The mirror keeps each STS17 track's original column order, which is not always ``xx, en``: the
English sentence comes first in ar-en, es-en-WMT (4b) and tr-en, second in es-en (4a). The
STS17 evaluator knows each file's column languages so that a per-language embedder map (one
model per language) encodes every column with the right model.
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
    correlation_metrics,
    correlations,
    embedder_for,
    encode,
    mean,
)
from psp.evaluate.readers import ScoredPairs, read_scored_pairs, require_dir
from psp.model.pooling import row_cosines

STS_YEARS = (2012, 2013, 2014, 2015, 2016)
STSB_SPLITS = ("dev", "test")
CORRELATION_COLUMNS = ("benchmark", "dataset", "n_pairs", "pearson", "spearman")


def predict_similarity(
    model: EmbedderOrMap, sets: Mapping[str, ScoredPairs]
) -> dict[str, np.ndarray]:
    """Cosine of each pair of every set, embedding all English sentences in one call."""
    labels = list(sets)
    sentences = [s for label in labels for s in (*sets[label].sent1, *sets[label].sent2)]
    vectors = encode(embedder_for(model, "en"), sentences)
    predictions, start = {}, 0
    for label in labels:
        n = len(sets[label])
        predictions[label] = row_cosines(
            vectors[start : start + n], vectors[start + n : start + 2 * n]
        )
        start += 2 * n
    return predictions


def correlation_row(benchmark: str, dataset: str, predicted: np.ndarray, gold: np.ndarray) -> Row:
    pearson, spearman = correlations(predicted, gold)
    return {
        "benchmark": benchmark,
        "dataset": dataset,
        "n_pairs": len(gold),
        "pearson": pearson,
        "spearman": spearman,
    }


def average_row(benchmark: str, dataset: str, rows: Sequence[Row]) -> Row:
    """A row whose correlations are the unweighted mean of ``rows`` (the paper's averaging)."""
    return {
        "benchmark": benchmark,
        "dataset": dataset,
        "n_pairs": sum(row["n_pairs"] for row in rows),
        "pearson": mean(row["pearson"] for row in rows),
        "spearman": mean(row["spearman"] for row in rows),
    }


class StsEvaluator(Evaluator):
    """SemEval STS 2012-2016, per dataset, per year and averaged over the years.

    Rows (``sts.csv``): one per dataset; per year a ``mean`` row (mean over its datasets) and
    an ``all`` row (correlation over the concatenated datasets); then ``avg`` rows averaging
    the yearly ``mean`` and ``all`` rows. Keys: ``sts12_MSRpar_pearson``,
    ``sts12_mean_pearson``, ``sts12_all_spearman``, ``sts_avg_pearson`` (primary, the paper's
    figure), ``sts_avg_all_spearman`` (Sentence-BERT's, averaged over the years).

    Example:
        >>> evaluator = StsEvaluator.from_dir("/work/shared/data")  # doctest: +SKIP
        >>> evaluator(model)["sts_avg_pearson"]  # doctest: +SKIP
    """

    columns = CORRELATION_COLUMNS
    table = "sts"

    def __init__(self, years: Mapping[str, Mapping[str, ScoredPairs]], name: str = "sts"):
        """``years`` maps a two-digit year (``"12"``) to its datasets by name."""
        if not years or not all(years.values()):
            raise ValueError("StsEvaluator needs at least one year with at least one dataset")
        self.years = {year: dict(datasets) for year, datasets in years.items()}
        self.name = name
        self.primary_metric = f"{name}_avg_pearson"

    @classmethod
    def from_dir(
        cls, data_root: str | os.PathLike, years: Sequence[int] = STS_YEARS, name: str = "sts"
    ) -> StsEvaluator:
        """Read ``{data_root}/sts/en/STS{year}/*.tsv`` (datasets in file-name order)."""
        root = Path(data_root) / "sts" / "en"
        loaded = {}
        for year in years:
            folder = require_dir(root / f"STS{year}", f"STS {year}")
            files = sorted(folder.glob("*.tsv"))
            if not files:
                raise FileNotFoundError(f"no *.tsv dataset in {folder}")
            loaded[f"{year % 100:02d}"] = {path.stem: read_scored_pairs(path) for path in files}
        return cls(loaded, name=name)

    def compute(self, model: EmbedderOrMap) -> list[Row]:
        sets = {
            (y, d): pairs for y, datasets in self.years.items() for d, pairs in datasets.items()
        }
        flat = predict_similarity(model, {f"{y}/{d}": pairs for (y, d), pairs in sets.items()})
        rows, means, alls = [], [], []
        for year, datasets in self.years.items():
            benchmark = f"STS{year}"
            dataset_rows = [
                correlation_row(benchmark, d, flat[f"{year}/{d}"], pairs.scores)
                for d, pairs in datasets.items()
            ]
            means.append(average_row(benchmark, "mean", dataset_rows))
            alls.append(
                correlation_row(
                    benchmark,
                    "all",
                    np.concatenate([flat[f"{year}/{d}"] for d in datasets]),
                    np.concatenate([pairs.scores for pairs in datasets.values()]),
                )
            )
            rows += [*dataset_rows, means[-1], alls[-1]]
        rows += [average_row("avg", "mean", means), average_row("avg", "all", alls)]
        return rows

    def metrics(self, rows: list[Row]) -> dict[str, float]:
        out = {}
        for row in rows:
            if row["benchmark"] == "avg":
                prefix = f"{self.name}_avg" + ("" if row["dataset"] == "mean" else "_all")
                out[f"{prefix}_pearson"] = row["pearson"]
                out[f"{prefix}_spearman"] = row["spearman"]
            else:
                prefix = f"{self.name}{row['benchmark'][3:]}_{row['dataset']}"
                out[f"{prefix}_pearson"] = row["pearson"]
                out[f"{prefix}_spearman"] = row["spearman"]
        return out


class StsbEvaluator(Evaluator):
    """STS Benchmark splits: Pearson and Spearman x100 of cosine against gold.

    Keys ``stsb_dev_pearson``, ``stsb_dev_spearman``, ``stsb_test_...``; the primary metric is
    the first split's Spearman (dev by default: the split to select epochs on).

    Example:
        >>> dev = StsbEvaluator.from_dir("/work/shared/data", splits=("dev",))  # doctest: +SKIP
        >>> dev(model)["stsb_dev_spearman"]  # doctest: +SKIP
    """

    columns = CORRELATION_COLUMNS
    table = "sts"

    def __init__(self, splits: Mapping[str, ScoredPairs], name: str = "stsb"):
        if not splits:
            raise ValueError("StsbEvaluator needs at least one split")
        self.splits = dict(splits)
        self.name = name
        self.primary_metric = f"{name}_{next(iter(self.splits))}_spearman"

    @classmethod
    def from_dir(
        cls, data_root: str | os.PathLike, splits: Sequence[str] = STSB_SPLITS, name: str = "stsb"
    ) -> StsbEvaluator:
        """Read ``{data_root}/sts/stsb/{split}.tsv``."""
        folder = require_dir(Path(data_root) / "sts" / "stsb", "STS Benchmark")
        return cls(
            {split: read_scored_pairs(folder / f"{split}.tsv") for split in splits}, name=name
        )

    def compute(self, model: EmbedderOrMap) -> list[Row]:
        predictions = predict_similarity(model, self.splits)
        return [
            correlation_row("STSB", split, predictions[split], pairs.scores)
            for split, pairs in self.splits.items()
        ]

    def metrics(self, rows: list[Row]) -> dict[str, float]:
        return correlation_metrics(self.name, rows, "dataset")


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
        return correlation_metrics(self.name, rows, "track")
