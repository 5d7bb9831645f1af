"""Training hyperparameters: one dataclass whose field specs also make the CLI flags.

Every key a config file, the workflow or ``psp train`` can set is a field of
:class:`TrainConfig` with a :class:`Spec` (type, range, help). ``__post_init__`` checks each
value against its spec, so a bad value stops the run at once whether it came from a flag, a
YAML file or the workflow config, and :mod:`psp.cli.train` builds one flag per field from the
same specs, so flags, defaults and ranges cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from psp.config_keys import reject_unknown_keys


@dataclass(frozen=True)
class Spec:
    """What one key accepts: ``kind`` values in ``[low, high)`` (``low`` excluded when
    ``low_open``), one of ``choices`` for a string that names an option, or ``None`` when
    ``nullable``."""

    kind: type
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    nullable: bool = False
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.kind is bool:
            text = "true or false"
        elif self.choices:
            text = f"one of {', '.join(self.choices)}"
        elif self.kind is str:
            text = "a string"
        elif self.high is not None:
            text = f"a number in [{self.low:g}, {self.high:g})"
        elif self.kind is int:
            text = f"a whole number >= {self.low:g}"
        else:
            text = f"a finite number {'>' if self.low_open else '>='} {self.low:g}"
        return text + (" or none" if self.nullable else "")

    def in_range(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        if self.choices:
            return value in self.choices
        if self.kind is bool or self.kind is str:
            return isinstance(value, self.kind)
        if isinstance(value, bool) or not isinstance(
            value, (int, float) if self.kind is float else int
        ):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or value < self.high

    def parse(self, text: str) -> Any:
        """The value of a command-line string; ``ValueError`` with the expected form."""
        value: Any = text
        if self.nullable and text.lower() in ("none", "null"):
            value = None
        elif self.kind in (int, float):
            try:
                value = self.kind(text)
            except ValueError:
                value = text
        if not self.in_range(value):
            raise ValueError(f"expected {self.describe()}, got {text!r}")
        return value


def _key(default: Any, kind: type, help: str, **limits: Any) -> Any:
    return dataclasses.field(default=default, metadata={"spec": Spec(kind, help, **limits)})


@dataclass
class TrainConfig:
    """Training hyperparameters; the defaults are the paper's (ParaNMT setting).

    The mega-batch starts at one minibatch and grows by one every ``anneal`` minibatches, so it
    reaches its cap ``megabatch_size`` after ``anneal * (megabatch_size - 1)`` steps, never
    reset between epochs. A run has ``epochs * ceil(n_pairs / batch_size)`` steps; to spend
    part of it at the cap, ``anneal`` must be below ``steps / (megabatch_size - 1)``.
    """

    dim: int = _key(1024, int, "embedding dimension", low=1)
    batch_size: int = _key(128, int, "pairs per minibatch", low=2)
    loss: str = _key(
        "margin",
        str,
        "objective: margin (P-SP: hardest mega-batch negative under a margin) or "
        "pair_weighting (multi-similarity: every informative pair of the minibatch, weighted)",
        choices=("margin", "pair_weighting"),
    )
    margin: float = _key(0.4, float, "hinge margin delta of the margin loss", low=0)
    pw_alpha: float = _key(
        2.0, float, "pair_weighting: scale alpha of the positive pairs' term", low=0, low_open=True
    )
    pw_beta: float = _key(
        50.0, float, "pair_weighting: scale beta of the negative pairs' term", low=0, low_open=True
    )
    pw_lambda: float = _key(
        0.0,
        float,
        "pair_weighting: cosine lambda at which a pair's weight turns (positives below it and "
        "negatives above it weigh most)",
        low=-1,
        high=1,
    )
    pw_epsilon: float = _key(
        0.1,
        float,
        "pair_weighting: mining margin epsilon: a negative counts when its cosine is above the "
        "positive's minus epsilon, a positive when below the hardest negative's plus epsilon",
        low=0,
    )
    pw_negatives: str = _key(
        "both",
        str,
        "pair_weighting: a sentence's negatives: every other sentence of the minibatch (both) "
        "or those of the other side only (other_side)",
        choices=("both", "other_side"),
    )
    megabatch_size: int = _key(100, int, "cap of the mega-batch, in minibatches", low=1)
    anneal: int = _key(150, int, "minibatches between mega-batch size increments", low=1)
    epochs: int = _key(25, int, "passes over the training pairs", low=1)
    lr: float = _key(1e-3, float, "Adam learning rate", low=0, low_open=True)
    dropout: float = _key(0.0, float, "dropout on piece embeddings", low=0, high=1)
    grad_clip: float | None = _key(
        5.0,
        float,
        "max gradient L2 norm (clip_grad_norm, as the original); none: no clipping",
        low=0,
        low_open=True,
        nullable=True,
    )
    max_pieces: int | None = _key(
        None, int, "truncate sentences at train time; none: as stored", low=1, nullable=True
    )
    seed: int = _key(0, int, "seed of the initialization, the data order and dropout", low=0)
    max_steps: int | None = _key(
        None,
        int,
        "stop (and export) at the first mega-batch end past this step",
        low=1,
        nullable=True,
    )
    checkpoint_every: int = _key(
        1000, int, "steps between checkpoints (written at the next mega-batch end)", low=1
    )
    log_every: int = _key(50, int, "steps between rows of train_log.tsv", low=1)
    select_best: bool = _key(True, bool, "with an evaluator, export the best epoch, not the last")
    sparse: bool = _key(True, bool, "lazy row-sparse Adam (no: dense torch Adam, the baseline)")
    device: str = _key("cpu", str, "torch device: cpu, cuda, cuda:1...")
    threads: int | None = _key(
        None, int, "torch intra-op threads; none: torch's default", low=1, nullable=True
    )
    mine_block: int = _key(
        1024, int, "rows of the mega-batch similarity matrix computed at once", low=1
    )
    # Their ops are too small to split: on 2 cores, 100 steps took 3.66 s with 2 threads,
    # ~3.1 s with 1.
    step_threads: int | None = _key(
        1,
        int,
        "torch threads for the minibatch steps on CPU; none: as many as for mining",
        low=1,
        nullable=True,
    )

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
        "grad_clip",
        "max_pieces",
        "seed",
        "sparse",
    )

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            spec, value = field.metadata["spec"], getattr(self, field.name)
            if not spec.in_range(value):
                raise ValueError(f"{field.name}: expected {spec.describe()}, got {value!r}")

    @classmethod
    def from_dict(cls, values: dict, what: str = "training config") -> TrainConfig:
        """Build from a dict (YAML/JSON); an unknown key or a value out of range is a
        ``ValueError`` that names it (prefixed with ``what``)."""
        reject_unknown_keys(values, cls, what)
        try:
            return cls(**values)
        except ValueError as err:
            raise ValueError(f"{what}: {err}") from None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def specs() -> dict[str, tuple[Any, Spec]]:
    """``{key: (default, spec)}`` for every training key, in declaration order."""
    return {f.name: (f.default, f.metadata["spec"]) for f in dataclasses.fields(TrainConfig)}


def megabatch_size_at(step: int, anneal: int, cap: int) -> int:
    """Mega-batch size (in minibatches) for the mega-batch starting at global ``step``."""
    return min(cap, 1 + step // anneal)
