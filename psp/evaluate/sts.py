"""English semantic textual similarity: SemEval STS 2012-2016 (paper Table 2) and STS Benchmark.

Scores are the cosine similarity of the two sentence embeddings, compared with the gold
scores by correlation x100. Two conventions are reported side by side because the literature
uses both: the paper's (Pearson r per dataset, averaged within each year, then over the
years) and Sentence-BERT's (Spearman rho over the concatenation of a year's datasets,
labelled ``all``).
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
        out = {}
        for row in rows:
            out[f"{self.name}_{row['dataset']}_pearson"] = row["pearson"]
            out[f"{self.name}_{row['dataset']}_spearman"] = row["spearman"]
        return out
