"""One-machine mining: the workflow's shard jobs run in sequence in one process.

``mine_files`` (behind ``psp mine``) and ``mine_texts`` call exactly the functions the workflow
rules call (``embed_shard``, ``knn_shard_pair``, ``reduce_parts``, ``write_mined``), so the two
paths cannot drift apart. Shard outputs in ``work_dir`` are atomic, so a rerun resumes by
skipping the ones already there; ``manifest.json`` guards against resuming someone else's run.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from psp.io import InputError, atomic_open
from psp.mine.config import MineConfig
from psp.mine.knn import KNN, knn_shard_pair, reduce_parts
from psp.mine.margin import score_pairs
from psp.mine.output import write_mined
from psp.mine.shards import count_lines, embed_shard, shard_bounds

log = logging.getLogger(__name__)


def check_model_languages(model, src: str, tgt: str, model_path: str | os.PathLike) -> None:
    """Refuse to mine a language pair the model was not trained for.

    A model whose config lists no languages cannot be checked and is accepted with a warning.
    """
    languages = list(getattr(getattr(model, "config", None), "languages", None) or [])
    if not languages:
        log.warning("%s: model config lists no languages; cannot check %s-%s", model_path, src, tgt)
        return
    missing = [lang for lang in (src, tgt) if lang not in languages]
    if missing:
        raise InputError(
            f"{model_path}: model languages {languages} do not include {missing} "
            f"(asked to mine {src}-{tgt})"
        )


def embed_corpus(model, text_path, cfg: MineConfig, out_dir: Path, name: str) -> list[Path]:
    """Embed every shard of one corpus (skipping shards already on disk)."""
    paths = []
    for shard in range(cfg.n_shards):
        path = out_dir / f"{name}.{shard:04d}.npy"
        if not path.exists():
            embed_shard(model, text_path, shard, cfg.n_shards, path, cfg.batch_size, cfg.float16)
        paths.append(path)
    return paths


def run_knn(
    src_shards: Sequence[Path],
    tgt_shards: Sequence[Path],
    n_src: int,
    n_tgt: int,
    cfg: MineConfig,
    out_dir: Path,
) -> tuple[KNN, KNN]:
    """All shard pairs (skipping parts already on disk), reduced to global fwd/bwd kNN."""
    src_bounds, tgt_bounds = shard_bounds(n_src, cfg.n_shards), shard_bounds(n_tgt, cfg.n_shards)
    parts = []
    for s, src_npy in enumerate(src_shards):
        for t, tgt_npy in enumerate(tgt_shards):
            part = out_dir / f"knn.{s:04d}-{t:04d}.npz"
            if not part.exists():
                knn_shard_pair(
                    src_npy,
                    tgt_npy,
                    src_bounds[s][0],
                    tgt_bounds[t][0],
                    cfg.k,
                    part,
                    cfg.block_size,
                    cfg.index,
                )
            parts.append(part)
    return reduce_parts(parts, cfg.k)


def _identity(path) -> dict:
    """What a resumed run must find unchanged about an input file."""
    st = os.stat(path)
    return {"path": str(Path(path).resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _check_manifest(work_dir: Path, manifest: dict) -> None:
    path = work_dir / "manifest.json"
    if path.exists():
        previous = json.loads(path.read_text())
        if previous != manifest:
            raise InputError(
                f"{path}: work dir holds a run with other inputs or settings; use an empty work dir"
            )
    else:
        with atomic_open(path, "wt") as out:
            json.dump(manifest, out, indent=2)


def knn_for_files(
    model, src_path, tgt_path, cfg: MineConfig, work_dir, model_id: str = ""
) -> tuple[KNN, KNN, dict]:
    """Embed both corpora in shards and compute the global two-way kNN; returns timings too.

    ``model_id`` (e.g. the model directory) is recorded in the work dir's manifest so that shards
    embedded by another model are never reused.
    """
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    n_src, n_tgt = count_lines(src_path), count_lines(tgt_path)
    for path, n in ((src_path, n_src), (tgt_path, n_tgt)):
        if n == 0:
            raise InputError(f"{path}: empty corpus (no lines to mine)")
    manifest = {
        "src_file": _identity(src_path),
        "tgt_file": _identity(tgt_path),
        "n_src": n_src,
        "n_tgt": n_tgt,
        "model": model_id,
        **{key: getattr(cfg, key) for key in ("k", "n_shards", "float16")},
        "index": dataclasses.asdict(cfg.index) if cfg.index else None,
    }
    _check_manifest(work_dir, manifest)
    t0 = time.perf_counter()
    src_shards = embed_corpus(model, src_path, cfg, work_dir, "src")
    tgt_shards = embed_corpus(model, tgt_path, cfg, work_dir, "tgt")
    t1 = time.perf_counter()
    fwd, bwd = run_knn(src_shards, tgt_shards, n_src, n_tgt, cfg, work_dir)
    return fwd, bwd, {"embed": t1 - t0, "knn": time.perf_counter() - t1}


def mine_files(
    model,
    src_path: str | os.PathLike,
    tgt_path: str | os.PathLike,
    cfg: MineConfig,
    out_tsv_gz: str | os.PathLike,
    work_dir: str | os.PathLike,
    stats_json: str | os.PathLike | None = None,
    histogram_png: str | os.PathLike | None = None,
    model_id: str = "",
) -> dict:
    """Mine two text files (one sentence per line) into ``out_tsv_gz``; returns the stats dict.

    ``stats_json`` and ``histogram_png`` default to ``<output stem>.stats.json`` and
    ``<output stem>.histogram.png``, the names the workflow uses.
    """
    out = Path(out_tsv_gz)
    stem = out.name.removesuffix(".gz").removesuffix(".tsv")
    stats_json = stats_json or out.with_name(f"{stem}.stats.json")
    histogram_png = histogram_png or out.with_name(f"{stem}.histogram.png")
    fwd, bwd, timings = knn_for_files(model, src_path, tgt_path, cfg, work_dir, model_id)
    return write_mined(src_path, tgt_path, fwd, bwd, cfg, out, stats_json, histogram_png, timings)


def _write_sentences(sentences: Sequence[str], path: Path) -> None:
    """One sentence per line; embedded newlines would shift line numbers, so they become spaces."""
    with atomic_open(path, "wt") as out:
        for sentence in sentences:
            out.write(" ".join(sentence.splitlines()) + "\n")


def mine_texts(
    model,
    src_sentences: Sequence[str],
    tgt_sentences: Sequence[str],
    cfg: MineConfig | None = None,
    work_dir: str | os.PathLike | None = None,
) -> list[tuple[float, int, int]]:
    """Mine two in-memory sentence lists; returns ``(score, src_index, tgt_index)`` best first.

    Shards go to a fresh temporary folder (inside ``work_dir`` when given) removed afterwards.

    Pairs below ``cfg.effective_threshold`` are dropped; pass ``threshold=-math.inf`` to get every
    retrieved candidate (as the BUCC evaluation does).

    Example:
        >>> pairs = mine_texts(model, ["hola mundo"], ["hello world"], MineConfig(threshold=-math.inf))
    """
    cfg = cfg or MineConfig()
    for name, sentences in (("source", src_sentences), ("target", tgt_sentences)):
        if len(sentences) == 0:
            raise InputError(f"mine_texts: empty {name} corpus")
    if work_dir is not None:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="psp-mine-", dir=work_dir) as tmp:
        work = Path(tmp)
        src_path, tgt_path = work / "src.txt", work / "tgt.txt"
        _write_sentences(src_sentences, src_path)
        _write_sentences(tgt_sentences, tgt_path)
        fwd, bwd, _ = knn_for_files(model, src_path, tgt_path, cfg, work / "shards")
    scores, src, tgt = score_pairs(fwd, bwd, cfg.k, cfg.margin, cfg.retrieval)
    keep = scores >= cfg.effective_threshold
    return list(zip(scores[keep].tolist(), src[keep].tolist(), tgt[keep].tolist(), strict=True))


def all_candidates(cfg: MineConfig) -> MineConfig:
    """The same settings with no threshold, for tuning one."""
    return dataclasses.replace(cfg, threshold=-math.inf)
