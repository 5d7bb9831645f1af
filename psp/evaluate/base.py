"""What every evaluator shares: the embedder protocol, the evaluator protocol and the maths.

The evaluator protocol follows sentence-transformers (``__call__(model, output_path=None,
epoch=-1, steps=-1) -> dict[str, float]`` with name-prefixed keys and a ``primary_metric``), so
the same objects serve the training loop (best-epoch selection) and the evaluation harness.
Each evaluator also exposes ``compute(model) -> rows``: the per-dataset table the harness writes
to CSV, from which ``metrics(rows)`` derives the flat dictionary.
"""

from __future__ import annotations

import csv
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from psp.io import InputError, atomic_open, iter_lines


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns sentences into one vector each (row order = input order)."""

    def embed(self, sentences: list[str]) -> np.ndarray: ...


#: One embedder for every language, or one per language code (``"en"``, ``"es"``...).
EmbedderOrMap = Embedder | Mapping[str, Embedder]

Row = dict[str, Any]


def embedder_for(model: EmbedderOrMap, language: str) -> Embedder:
    """The embedder that encodes ``language``: ``model`` itself unless it is a per-language map."""
    if isinstance(model, Mapping):
        try:
            return model[language]
        except KeyError:
            raise ValueError(
                f"no embedder for language {language!r} (have: {', '.join(sorted(model))})"
            ) from None
    return model


def encode(model: Embedder, sentences: Sequence[str]) -> np.ndarray:
    """Embed ``sentences`` (each distinct sentence once) and return float32 rows in input order.

    STS files repeat sentences across pairs and datasets; embedding each once keeps slow peers
    affordable and the speed measurement honest.
    """
    unique = list(dict.fromkeys(sentences))
    vectors = np.asarray(model.embed(unique), dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(unique):
        raise ValueError(
            f"{type(model).__name__}.embed returned shape {vectors.shape} for {len(unique)} sentences"
        )
    index = {sentence: i for i, sentence in enumerate(unique)}
    return vectors[[index[s] for s in sentences]]


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Unit-length rows; an all-zero row stays zero (cosine 0 with everything)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def paired_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of row i of ``a`` with row i of ``b``."""
    return np.einsum("ij,ij->i", normalize(a), normalize(b))


def correlations(predicted: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """(Pearson r, Spearman rho), both x100; NaN when the predictions are constant."""
    # Imported here: scipy.stats takes seconds to import, and the workflow imports this package
    # (for its language tables) every time Snakemake starts, twice per cluster job.
    from scipy import stats

    if len(predicted) < 2 or np.ptp(predicted) == 0:
        return math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        pearson = stats.pearsonr(predicted, gold).statistic
        spearman = stats.spearmanr(predicted, gold).statistic
    return 100 * float(pearson), 100 * float(spearman)


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return float(np.mean(values)) if values else math.nan


class Evaluator:
    """Base of the evaluators: subclasses set ``name``, ``primary_metric``, ``columns``, ``table``
    and implement :meth:`compute` and :meth:`metrics`.
    """

    name: str
    primary_metric: str
    greater_is_better: bool = True
    #: Column names of the rows :meth:`compute` returns.
    columns: tuple[str, ...]
    #: Stem of the harness CSV the rows go to (``sts`` -> ``sts.csv``).
    table: str

    def compute(self, model: EmbedderOrMap) -> list[Row]:
        raise NotImplementedError

    def metrics(self, rows: list[Row]) -> dict[str, float]:
        raise NotImplementedError

    @property
    def csv_file(self) -> str:
        return f"{self.name}_results.csv"

    def __call__(
        self,
        model: EmbedderOrMap,
        output_path: str | Path | None = None,
        epoch: int = -1,
        steps: int = -1,
    ) -> dict[str, float]:
        """Evaluate ``model``; with ``output_path``, append one row to ``{name}_results.csv``."""
        metrics = self.metrics(self.compute(model))
        if output_path is not None:
            append_results_row(Path(output_path) / self.csv_file, epoch, steps, metrics)
        return metrics


def append_results_row(path: Path, epoch: int, steps: int, metrics: Mapping[str, float]) -> None:
    """Append ``epoch, steps, metrics...`` to a CSV log, rewriting it atomically.

    The log is small (one row per evaluation), so rewriting keeps the all-or-nothing guarantee
    that a plain append would lose.
    """
    header = ["epoch", "steps", *metrics]
    rows: list[list[str]] = []
    if path.exists():
        lines = [text for _, text in iter_lines(path)]
        existing = list(csv.reader(lines))
        if existing and existing[0] != header:
            raise InputError(f"{path}:1: header differs from this evaluator's metrics")
        rows = existing[1:]
    rows.append([str(epoch), str(steps), *(f"{value:.6g}" for value in metrics.values())])
    with atomic_open(path, "wt") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


class SequentialEvaluator(Evaluator):
    """Run several evaluators on the same model and merge their metrics.

    ``primary_metric`` is the primary metric of the evaluator at ``main_index`` (default: the
    first), so a combination can still drive best-epoch selection.
    """

    def __init__(
        self, evaluators: Sequence[Evaluator], main_index: int = 0, name: str = "sequential"
    ):
        if not evaluators:
            raise ValueError("SequentialEvaluator needs at least one evaluator")
        self.evaluators = list(evaluators)
        self.name = name
        main = self.evaluators[main_index]
        self.primary_metric = main.primary_metric
        self.greater_is_better = main.greater_is_better

    def __call__(
        self,
        model: EmbedderOrMap,
        output_path: str | Path | None = None,
        epoch: int = -1,
        steps: int = -1,
    ) -> dict[str, float]:
        merged: dict[str, float] = {}
        for evaluator in self.evaluators:
            merged.update(evaluator(model, output_path, epoch, steps))
        return merged
