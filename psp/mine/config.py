"""Settings of a mining run, as dataclasses that round-trip through plain dicts (config.yaml).

Each key is declared once, in ``psp/config.schema.yaml``: the workflow's ``mining`` entry, and
``mine_library``/``index_library`` for the keys only the library and ``psp mine`` take. Unknown
keys are an error so a typo in a config never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from typing import Any, Literal

from psp.config_schema import config_class, from_mapping

Margin = Literal["ratio", "distance", "absolute"]
Retrieval = Literal["max", "fwd", "bwd", "intersect"]
#: The workflow's ``mining`` entry, where the keys of both classes are declared.
MINING_ENTRY = "#/properties/mining/additionalProperties"

# Starting points when no threshold is given. LASER used 1.04 (WikiMatrix) to 1.06 (CCMatrix) for
# the ratio margin; the other two are the same cut expressed roughly in their units (cosine minus
# neighbourhood mean ~0.04; raw cosine ~0.8). Tune on the BUCC-style dev task (psp.mine.bucc).
DEFAULT_THRESHOLDS = {"ratio": 1.06, "distance": 0.04, "absolute": 0.8}
#: The workflow's ``threshold`` that is taken from data: the dev optimum of the pair's BUCC-style
#: evaluation (:func:`psp.mine.bucc.mining_threshold`).
AUTO_THRESHOLD = "auto"


# The keys of the workflow's entry that say what to mine and how the input sides are read and
# filtered: none of the classes below takes them.
INPUT_KEYS = ("model", "src", "tgt", "min_tokens", "max_tokens", "langid", "text_field")
FILTER_KEYS = ("dedup", "max_overlap", "pair_langid", "max_length_ratio", "max_score")
SEARCH_KEYS = ("ivf_min_size", "nlist", "nprobe", "compare")


def _from_dict(cls, data: dict[str, Any] | None):
    return from_mapping(cls, dict(data or {}), cls.__name__)


@config_class(
    MINING_ENTRY,
    exclude=INPUT_KEYS
    + SEARCH_KEYS
    + ("shards", "k", "margin", "retrieval", "threshold")
    + ("float16",),
)
class PairFilterConfig:
    """What is removed from the mined pairs before they are written: repeated pairs, copies,
    pairs in the wrong language, of implausible lengths or implausibly high scores (see
    :mod:`psp.mine.pair_filters`, which applies them, and docs/mining.md for the defaults).
    """

    dedup: bool
    max_overlap: float | None
    pair_langid: bool
    max_length_ratio: float | None
    max_score: float | None

    @classmethod
    def none(cls) -> PairFilterConfig:
        """Every filter off: the candidates as scored."""
        return cls(
            dedup=False, max_overlap=None, pair_langid=False, max_length_ratio=None, max_score=None
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> PairFilterConfig:
        return _from_dict(cls, data)


@config_class(
    MINING_ENTRY,
    "#/definitions/index_library",
    exclude=INPUT_KEYS + FILTER_KEYS + ("shards", "k", "margin", "retrieval", "float16"),
)
class IndexConfig:
    """How a pair of sides is searched.

    A pair whose sides hold fewer than ``ivf_min_size`` rows in geometric mean
    (``sqrt(n_src · n_tgt)``: exact search costs ``n_src · n_tgt`` products) is searched exactly
    (blockwise matrix products). From there on the rows are assigned to ``nlist`` inverted lists by one
    spherical k-means quantizer per pair, each row probes the ``nprobe`` lists nearest to it
    and is stored in the first, and the pairs are scored list by list, as matrix products over
    the stored embeddings: the scores are the exact inner products, only the candidates are
    approximate. ``compare`` says which pairs: ``own_list``, those whose one row probes the
    other's own list; ``common_list``, those whose rows probe a common list (more pairs, faster
    products, and the recall that flat real-embedding neighbourhoods need); ``auto``, one of the
    two chosen per pair by a recall probe on the quantizer's training sample
    (:func:`psp.mine.index.probe_recall`).

    Every row's coarse assignment costs ``nlist`` inner products and its scan ``nprobe · n /
    nlist``; ``nlist = sqrt(nprobe · n)`` makes the two equal, which minimises their sum. The
    quantizer is trained on ``train_size`` rows (default ``train_per_list`` per list) for
    ``train_iters`` k-means iterations. The defaults are the configuration
    ``benchmarks/bench_mine_scale.py`` measures (docs/mining.md, Sizing).
    """

    ivf_min_size: int
    nlist: int | None  # None: sqrt(nprobe * n), assignment and scan in balance
    nprobe: int
    compare: Literal["auto", "own_list", "common_list"]
    train_size: int | None  # None: train_per_list * nlist, at most n
    train_per_list: int
    train_iters: int
    list_split: float | None  # None: k-means list sizes as trained
    seed: int

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


@config_class(
    MINING_ENTRY,
    "#/definitions/mine_library",
    rename={"n_shards": "shards"},
    exclude=INPUT_KEYS + FILTER_KEYS + SEARCH_KEYS,
)
class MineConfig:
    """Margin-based bitext mining (Artetxe & Schwenk, 2019) settings.

    ``k`` neighbours are found in both directions; their mean cosine is the margin's denominator
    and they are also the candidates each sentence may be paired with. ``threshold`` None means
    :data:`DEFAULT_THRESHOLDS` for the chosen margin; ``-inf`` keeps every candidate (for tuning).
    ``index`` None searches exactly (blockwise matrix products); an :class:`IndexConfig` lets
    large shards use an inverted file. ``filters`` are applied to the scored pairs before they
    are written (:class:`PairFilterConfig`).
    """

    k: int
    margin: Margin
    retrieval: Retrieval
    threshold: float | None
    n_shards: int
    block_size: int
    batch_size: int
    float16: bool
    index: IndexConfig | None = field(default=None)
    filters: PairFilterConfig = field(default_factory=PairFilterConfig)

    def _check(self) -> None:
        if isinstance(self.index, dict):
            self.index = IndexConfig.from_dict(self.index)
        if isinstance(self.filters, dict):
            self.filters = PairFilterConfig.from_dict(self.filters)

    @property
    def effective_threshold(self) -> float:
        return DEFAULT_THRESHOLDS[self.margin] if self.threshold is None else float(self.threshold)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> MineConfig:
        return _from_dict(cls, data)
