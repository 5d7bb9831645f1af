"""Bitext mining with margin scores over Faiss/GEMM kNN, split into shard jobs.

Workflow jobs, in DAG order (each one a thin script over one function):

1. ``embed_shard`` per corpus shard → ``.npy`` (L2-normalised, memory-mappable)
2. ``knn_shard_pair`` per (source shard, target shard) → ``.npz`` top-k both directions
3. ``reduce_parts`` (+ ``save_knn``) → global fwd/bwd top-k
4. ``write_mined`` → ``score<TAB>src<TAB>tgt`` ``.tsv.gz``, ``stats.json``, histogram

``mine_files`` / ``mine_texts`` run the same jobs in one process; ``psp.mine.bucc`` evaluates.
"""

from __future__ import annotations

from psp.mine.config import DEFAULT_THRESHOLDS, IndexConfig, MineConfig
from psp.mine.index import build_index, search_index
from psp.mine.knn import (
    knn_both_directions,
    knn_shard_pair,
    load_knn,
    merge_knn,
    reduce_parts,
    save_knn,
)
from psp.mine.margin import knn_means, margin_score, score_pairs
from psp.mine.output import write_mined
from psp.mine.pipeline import check_model_languages, knn_for_files, mine_files, mine_texts
from psp.mine.shards import count_lines, embed_shard, open_embeddings, shard_bounds

__all__ = [
    "DEFAULT_THRESHOLDS",
    "IndexConfig",
    "MineConfig",
    "build_index",
    "check_model_languages",
    "count_lines",
    "embed_shard",
    "knn_both_directions",
    "knn_for_files",
    "knn_means",
    "knn_shard_pair",
    "load_knn",
    "margin_score",
    "merge_knn",
    "mine_files",
    "mine_texts",
    "open_embeddings",
    "reduce_parts",
    "save_knn",
    "score_pairs",
    "search_index",
    "shard_bounds",
    "write_mined",
]
