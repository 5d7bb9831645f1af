"""Training hyperparameters: one dataclass made from the schema's ``train`` keys.

Every key a config file, the workflow or ``psp train`` can set is declared once, in
``psp/config.schema.yaml`` (``definitions.train``, and ``train_library`` for ``threads``, which
the workflow takes from the rule). :func:`psp.config_schema.config_class` gives
:class:`TrainConfig` the defaults and range checks of those keys, so a bad value stops the run at
once whether it came from a flag, a YAML file or the workflow config, and :mod:`psp.cli.train`
makes one flag per key from the same declaration.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from psp.config_schema import config_class, from_mapping

Loss = Literal["margin", "pair_weighting"]
PairNegatives = Literal["both", "other_side"]


@config_class("#/definitions/train", "#/definitions/train_library")
class TrainConfig:
    """Training hyperparameters; the defaults are the paper's (ParaNMT setting).

    The mega-batch starts at one minibatch and grows by one every ``anneal`` minibatches, so it
    reaches its cap ``megabatch_size`` after ``anneal * (megabatch_size - 1)`` steps, never
    reset between epochs. A run has ``epochs * ceil(n_pairs / batch_size)`` steps; to spend
    part of it at the cap, ``anneal`` must be below ``steps / (megabatch_size - 1)``.
    Each key's meaning, range and default: ``psp/config.schema.yaml``, ``definitions.train``.
    """

    dim: int
    batch_size: int
    loss: Loss
    margin: float
    pw_alpha: float
    pw_beta: float
    pw_lambda: float
    pw_epsilon: float
    pw_negatives: PairNegatives
    megabatch_size: int
    anneal: int
    epochs: int
    lr: float
    dropout: float
    token_dropout: float
    grad_clip: float | None
    max_pieces: int | None
    seed: int
    max_steps: int | None
    checkpoint_every: int
    log_every: int
    select_best: bool
    sparse: bool
    device: str
    threads: int | None
    mine_block: int
    # Their ops are too small to split: on 2 cores, 100 steps took 3.66 s with 2 threads,
    # ~3.1 s with 1 (the schema's default of 1).
    step_threads: int | None
    workers: int | None

    # Must match on resume: they fix the parameter shapes, the data order or the objective and
    # updates the checkpoint's parameters were trained with. A finished run is resumed too (a
    # rerun re-exports it, or trains on when epochs grew), so a key missing here would let a
    # rerun with a new value export the old parameters under the new config.
    RESUME_FIXED = (
        "dim",
        "batch_size",
        "loss",
        "margin",
        "pw_alpha",
        "pw_beta",
        "pw_lambda",
        "pw_epsilon",
        "pw_negatives",
        "megabatch_size",
        "anneal",
        "lr",
        "dropout",
        "token_dropout",
        "grad_clip",
        "max_pieces",
        "seed",
        "sparse",
    )

    @classmethod
    def from_dict(cls, values: dict, what: str = "training config") -> TrainConfig:
        """Build from a dict (YAML/JSON); an unknown key or a value out of range is a
        ``ValueError`` that names it (prefixed with ``what``)."""
        return from_mapping(cls, values, what)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def megabatch_size_at(step: int, anneal: int, cap: int) -> int:
    """Mega-batch size (in minibatches) for the mega-batch starting at global ``step``."""
    return min(cap, 1 + step // anneal)
