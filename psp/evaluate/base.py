"""What every evaluator shares: the embedder protocol, the evaluator protocol and the maths.

The evaluator protocol follows sentence-transformers (``__call__(model) -> dict[str, float]``
with name-prefixed keys, a ``primary_metric`` and whether it is ``greater_is_better``), so the
same objects serve the training loop (best-epoch selection, :mod:`psp.train.selection`) and the
evaluation harness.
Each evaluator also exposes ``compute(model) -> rows``: the per-dataset table the harness writes
to CSV, from which ``metrics(rows)`` derives the flat dictionary.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


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


def correlation_metrics(name: str, rows: Sequence[Row], key: str) -> dict[str, float]:
    """``{name}_{row[key]}_pearson`` and ``..._spearman`` of each row: the flat keys of an
    evaluator whose table has one correlation row per split or track."""
    out = {}
    for row in rows:
        out[f"{name}_{row[key]}_pearson"] = row["pearson"]
        out[f"{name}_{row[key]}_spearman"] = row["spearman"]
    return out


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return float(np.mean(values)) if values else math.nan


class Evaluator:
    """Base of the evaluators: subclasses set ``name``, ``primary_metric``, ``columns``, ``table``
    and implement :meth:`compute` and :meth:`metrics`.
    """

    name: str
    primary_metric: str
    #: Direction of ``primary_metric`` for best-epoch selection (Tatoeba error: lower is better).
    greater_is_better: bool = True
    #: Column names of the rows :meth:`compute` returns.
    columns: tuple[str, ...]
    #: Stem of the harness CSV the rows go to (``sts`` -> ``sts.csv``).
    table: str

    def compute(self, model: EmbedderOrMap) -> list[Row]:
        raise NotImplementedError

    def metrics(self, rows: list[Row]) -> dict[str, float]:
        raise NotImplementedError

    def __call__(self, model: EmbedderOrMap) -> dict[str, float]:
        """Evaluate ``model``: the flat metrics of :meth:`compute`'s rows."""
        return self.metrics(self.compute(model))


class SelectingEvaluator:
    """Several evaluators run after each epoch; the first one's primary metric decides.

    Training logs every metric (each becomes a learning-curve column) but selects the best
    epoch on one: a bitext model on retrieval of its held-out dev bitext, the task it is mined
    with, while its STS-B dev score is still logged beside it.
    """

    def __init__(self, deciding: Evaluator, *others: Evaluator):
        self.evaluators = (deciding, *others)
        self.primary_metric = deciding.primary_metric
        self.greater_is_better = deciding.greater_is_better

    def __call__(self, model: EmbedderOrMap) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for evaluator in self.evaluators:
            metrics.update(evaluator(model))
        return metrics
