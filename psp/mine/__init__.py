"""Bitext mining with margin scores over exact or Faiss IVF kNN, split into shard jobs.

Workflow jobs, in DAG order (each one a thin script over one function):

1. ``shard_text_file`` / ``write_sharded_text`` per side → sharded ``.txt.gz`` + shard plan
2. ``embed_shard`` per shard → ``.npy`` (L2-normalised, read back block by block)
3. ``train_index`` per pair and ``fill_index`` per shard (rows to lists), for pairs large
   enough for inverted-file search (list-major, exact scores: ``psp.mine.ivf``)
4. ``knn_shard_pair`` per (source shard, target shard) → ``.npz`` top-k both directions
5. ``reduce_parts`` → global fwd/bwd top-k; ``write_mined`` → the pairs above the threshold
   that pass the pair filters (``psp.mine.pair_filters``), ``score<TAB>src<TAB>tgt``
   ``.tsv.gz`` (or Parquet, with provenance: ``psp.mine.mined_table``), ``stats.json``,
   histogram

``mine_files`` / ``mine_texts`` run the same jobs in one process; ``psp.mine.bucc`` evaluates.
"""

from __future__ import annotations

import importlib

# Public names and the module each lives in. Loaded on first use (PEP 562), so that importing
# the light parts (``psp.mine.config`` for the command line's options, ``psp.mine.plan`` for the
# data stage) does not pull in torch and Faiss.
_EXPORTS = {
    "config": ("DEFAULT_THRESHOLDS", "IndexConfig", "MineConfig", "PairFilterConfig"),
    "index": ("fill_index", "load_lists", "train_index", "uses_ivf"),
    "ivf": ("ivf_knn_both_directions",),
    "knn": ("knn_both_directions", "knn_shard_pair"),
    "margin": ("knn_means", "margin_score", "score_pairs"),
    "output": ("write_mined",),
    "pair_filters": ("filter_reasons", "removed_counts"),
    "pipeline": (
        "check_model_languages",
        "knn_for_files",
        "mine_files",
        "mine_texts",
        "mined_outputs",
    ),
    "reduce": ("merge_knn", "read_direction", "reduce_parts"),
    "plan": ("ShardPlan", "load_plan", "shard_bounds", "shard_text_file", "write_sharded_text"),
    "shards": ("embed_shard", "open_embeddings"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'psp.mine' has no attribute {name!r}")
    return getattr(importlib.import_module(f"psp.mine.{_MODULE_OF[name]}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_MODULE_OF])


__all__ = [
    "DEFAULT_THRESHOLDS",
    "IndexConfig",
    "MineConfig",
    "PairFilterConfig",
    "ShardPlan",
    "check_model_languages",
    "embed_shard",
    "fill_index",
    "filter_reasons",
    "ivf_knn_both_directions",
    "knn_both_directions",
    "knn_for_files",
    "knn_means",
    "knn_shard_pair",
    "load_lists",
    "load_plan",
    "margin_score",
    "merge_knn",
    "mine_files",
    "mine_texts",
    "mined_outputs",
    "open_embeddings",
    "read_direction",
    "reduce_parts",
    "removed_counts",
    "score_pairs",
    "shard_bounds",
    "shard_text_file",
    "train_index",
    "uses_ivf",
    "write_mined",
    "write_sharded_text",
]
