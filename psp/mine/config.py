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

    A pair whose larger side has fewer than ``ivf_min_size`` rows is searched exactly (blockwise
    matrix products); from there on through inverted files built from ``factory`` (``{nlist}`` is
    substituted): ``"IVF{nlist},SQfp16"`` (half the memory of ``"IVF{nlist},Flat"``, the same
    recall in ``benchmarks/bench_mine_scale.py``), ``"IVF{nlist},SQ8"`` or ``"IVF{nlist},PQ64"``.
    The default size is where the measured IVF path (training and indexing included) overtakes
    the exact one on 2 cores: at 50,000 rows per side, 72 s against 172 s (README, Sizing).
    """

    ivf_min_size: int = 50_000
    factory: str = "IVF{nlist},SQfp16"
    nlist: int | None = None  # None: 4 * sqrt(n), the usual Faiss rule of thumb
    nprobe: int = 16
    train_size: int | None = None  # None: 64 vectors per list, at most n
    seed: int = 0

    def __post_init__(self):
        if self.ivf_min_size < 1 or self.nprobe < 1:
            raise ValueError("IndexConfig: ivf_min_size and nprobe must be >= 1")
        if not self.factory.startswith("IVF{nlist},"):
            raise ValueError(
                f"IndexConfig: factory {self.factory!r} must start with 'IVF{{nlist}},' (an inverted "
                "file without pre-transform, so list assignments can be shared between shards)"
            )

    def nlist_for(self, n: int) -> int:
        """Number of inverted lists for ``n`` database vectors (never more than n/39, Faiss's minimum)."""
        nlist = self.nlist or int(4 * math.sqrt(n))
        return max(1, min(nlist, n // 39))

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
