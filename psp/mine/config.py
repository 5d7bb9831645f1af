"""Settings of a mining run, as dataclasses that round-trip through plain dicts (config.yaml).

Unknown keys are an error so a typo in a config never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from psp.config_keys import reject_unknown_keys

Margin = Literal["ratio", "distance", "absolute"]
Retrieval = Literal["max", "fwd", "bwd", "intersect"]
MARGINS = ("ratio", "distance", "absolute")
RETRIEVALS = ("max", "fwd", "bwd", "intersect")

# Starting points when no threshold is given. LASER used 1.04 (WikiMatrix) to 1.06 (CCMatrix) for
# the ratio margin; the other two are the same cut expressed roughly in their units (cosine minus
# neighbourhood mean ~0.04; raw cosine ~0.8). Tune on the BUCC-style dev task (psp.mine.bucc).
DEFAULT_THRESHOLDS = {"ratio": 1.06, "distance": 0.04, "absolute": 0.8}


def _from_dict(cls, data: dict[str, Any] | None):
    data = dict(data or {})
    reject_unknown_keys(data, cls, cls.__name__)
    return cls(**data)


@dataclass
class IndexConfig:
    """How a pair of sides is searched.

    A pair whose sides hold fewer than ``ivf_min_size`` rows in geometric mean
    (``sqrt(n_src · n_tgt)``: exact search costs ``n_src · n_tgt`` products) is searched exactly
    (blockwise matrix products). From there on the rows are assigned to ``nlist`` inverted lists by one
    spherical k-means quantizer per pair, and each row is compared with the rows of the
    ``nprobe`` lists nearest to it, list by list, as matrix products over the stored embeddings:
    the scores are the exact inner products, only the candidates are approximate.

    Every row's coarse assignment costs ``nlist`` inner products and its scan ``nprobe · n /
    nlist``; ``nlist = sqrt(nprobe · n)`` makes the two equal, which minimises their sum. The
    quantizer is trained on ``train_size`` rows (default ``train_per_list`` per list) for
    ``train_iters`` k-means iterations. The defaults are the configuration
    ``benchmarks/bench_mine_scale.py`` measures (docs/mining.md, Sizing).
    """

    ivf_min_size: int = 20_000
    nlist: int | None = None  # None: sqrt(nprobe * n), assignment and scan in balance
    nprobe: int = 16
    train_size: int | None = None  # None: train_per_list * nlist, at most n
    train_per_list: int = 32
    train_iters: int = 10
    seed: int = 0

    def __post_init__(self):
        positive = ("ivf_min_size", "nprobe", "train_per_list", "train_iters")
        if any(getattr(self, key) < 1 for key in positive):
            raise ValueError(f"IndexConfig: {', '.join(positive)} must be >= 1")

    def nlist_for(self, n: int) -> int:
        """Number of inverted lists for ``n`` rows per side (at most n/8, so lists are not tiny)."""
        nlist = self.nlist or round(math.sqrt(self.nprobe * n))
        return max(1, min(nlist, n // 8))

    def train_rows(self, nlist: int, n: int) -> int:
        """Rows of the quantizer's training sample, out of ``n`` rows of both sides."""
        return min(n, self.train_size or self.train_per_list * nlist)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> IndexConfig:
        return _from_dict(cls, data)


@dataclass
class MineConfig:
    """Margin-based bitext mining (Artetxe & Schwenk, 2019) settings.

    ``k`` neighbours are found in both directions; their mean cosine is the margin's denominator
    and they are also the candidates each sentence may be paired with. ``threshold`` None means
    :data:`DEFAULT_THRESHOLDS` for the chosen margin; ``-inf`` keeps every candidate (for tuning).
    ``index`` None searches exactly (blockwise matrix products); an :class:`IndexConfig` lets
    large shards use an inverted file.
    """

    k: int = 4
    margin: Margin = "ratio"
    retrieval: Retrieval = "max"
    threshold: float | None = None
    n_shards: int = 1
    block_size: int = 4096
    batch_size: int = 8192
    float16: bool = False
    index: IndexConfig | None = field(default=None)

    def __post_init__(self):
        if self.k < 1 or self.n_shards < 1 or self.block_size < 1 or self.batch_size < 1:
            raise ValueError("MineConfig: k, n_shards, block_size and batch_size must be >= 1")
        if self.margin not in MARGINS:
            raise ValueError(f"MineConfig: margin {self.margin!r} not in {MARGINS}")
        if self.retrieval not in RETRIEVALS:
            raise ValueError(f"MineConfig: retrieval {self.retrieval!r} not in {RETRIEVALS}")
        if isinstance(self.index, dict):
            self.index = IndexConfig.from_dict(self.index)

    @property
    def effective_threshold(self) -> float:
        return DEFAULT_THRESHOLDS[self.margin] if self.threshold is None else float(self.threshold)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> MineConfig:
        return _from_dict(cls, data)
