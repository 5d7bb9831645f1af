"""Evaluation of sentence embedders: STS 2012-16 and STS-B (Table 2), STS17 (Table 3),
Tatoeba retrieval (Table 4), plus the harness that writes result files and paper-layout tables.

Anything with ``embed(list[str]) -> np.ndarray`` can be evaluated: our models (``psp.load``),
sentence-transformers models and converted original checkpoints (:mod:`psp.evaluate.peers`).

Example:
    >>> from psp.evaluate import StsbEvaluator  # doctest: +SKIP
    >>> StsbEvaluator.from_dir("/work/shared/data", splits=("dev",))(model)  # doctest: +SKIP
    {'stsb_dev_pearson': ..., 'stsb_dev_spearman': ...}
"""

from __future__ import annotations

from psp.evaluate.base import Embedder, Evaluator
from psp.evaluate.harness import build_evaluators, evaluate_embedder
from psp.evaluate.paper_tables import combine_tables
from psp.evaluate.peers import PeerUnavailable, load_embedder, spec_label
from psp.evaluate.sts import (
    STS17_COLUMNS,
    STS17_TRACKS,
    Sts17Evaluator,
    StsbEvaluator,
    StsEvaluator,
)
from psp.evaluate.tatoeba import TATOEBA_CODES, TATOEBA_LANGUAGES, TatoebaEvaluator

__all__ = [
    "STS17_COLUMNS",
    "STS17_TRACKS",
    "TATOEBA_CODES",
    "TATOEBA_LANGUAGES",
    "Embedder",
    "Evaluator",
    "PeerUnavailable",
    "Sts17Evaluator",
    "StsEvaluator",
    "StsbEvaluator",
    "TatoebaEvaluator",
    "build_evaluators",
    "combine_tables",
    "evaluate_embedder",
    "load_embedder",
    "spec_label",
]
