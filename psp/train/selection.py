"""Best-epoch selection: which metric decides, in which direction, and NaN never wins.

An evaluator names its deciding metric (``primary_metric``) and says whether higher is better
(``greater_is_better``: STS correlations yes, Tatoeba error no), as in
:class:`psp.evaluate.base.Evaluator`. A plain function returning a dict is accepted too: its
first key decides, higher being better.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

#: What training scores a model with after each epoch: an :class:`psp.evaluate.base.Evaluator`
#: instance or any function of the model returning metrics.
ModelScorer = Callable[[torch.nn.Module], dict[str, float]]


def primary_score(evaluator: ModelScorer, metrics: dict[str, float]) -> float:
    """The value of the evaluator's deciding metric in ``metrics``."""
    key = getattr(evaluator, "primary_metric", None)
    if key is None:
        key = next(iter(metrics))
    if key not in metrics:
        raise KeyError(
            f"evaluator's primary metric {key!r} not among its results {sorted(metrics)}"
        )
    return metrics[key]


def improves(score: float, best: float | None, greater_is_better: bool = True) -> bool:
    """Whether ``score`` beats ``best`` (``None``: nothing yet); a NaN score never does, so an
    epoch whose evaluation failed cannot be selected, nor block the selection of later ones."""
    if math.isnan(score):
        return False
    if best is None:
        return True
    return score > best if greater_is_better else score < best
