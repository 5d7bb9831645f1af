"""One-machine mining: the workflow's shard jobs run in sequence in one process.

``mine_files`` (behind ``psp mine``) and ``mine_texts`` call exactly the functions the workflow
rules call (``shard_text_file``, ``embed_shard``, ``train_index``, ``fill_index``,
``knn_shard_pair``, ``reduce_parts``, ``write_mined``), so the two paths cannot drift apart.
Shard outputs in the work dir are atomic, so a rerun resumes by skipping the ones already there;
:mod:`psp.mine.workdir` decides when a work dir may be reused, locks it and cleans it up.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from psp.data.sentence_files import Fields
from psp.io import InputError, atomic_open, temp_dir
from psp.mine.config import MineConfig, PairFilterConfig
from psp.mine.index import KNN, fill_index, load_lists, train_index, uses_ivf
from psp.mine.knn import knn_shard_pair
from psp.mine.margin import score_pairs
from psp.mine.mined_table import Format
from psp.mine.output import Origins, write_mined
from psp.mine.pair_filters import KEPT, check_languages_known, filter_reasons
from psp.mine.plan import ShardPlan, load_plan, shard_text_file
from psp.mine.reduce import reduce_parts
from psp.mine.shards import embed_shard
from psp.mine.workdir import claimed, fingerprint
from psp.model.directory import MODEL_FILES

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


@dataclass(frozen=True)
class Side:
    """One side of a run in its work dir: the sharded text, its plan, and where each row of it
    came from in the input (see :func:`psp.mine.plan.shard_text_file`)."""

    text: Path
    plan: ShardPlan
    origins: Path


def prepare_side(
    text_path, cfg: MineConfig, work_dir: Path, name: str, fields: Fields = Fields()
) -> Side:
    """The side's corpus re-written as a sharded text with its plan and origins (kept in
    ``work_dir``; the plan comes last, so a plan with its origins file is a complete side)."""
    text, plan_path = work_dir / f"{name}.txt.gz", work_dir / f"{name}.plan.json"
    origins = work_dir / f"{name}.origins.txt.gz"
    if plan_path.exists() and origins.exists():
        return Side(text, load_plan(plan_path), origins)
    plan = shard_text_file(
        text_path, cfg.n_shards, text, plan_path, fields=fields, out_origins=origins
    )
    return Side(text, plan, origins)


def embed_side(model, text: Path, plan: ShardPlan, *, cfg: MineConfig, work_dir: Path, name: str):
    """Embed every shard of one side (skipping shards already on disk)."""
    paths = []
    for shard in range(len(plan)):
        path = work_dir / f"{name}.{shard:04d}.npy"
        if not path.exists():
            embed_shard(
                model,
                text,
                plan,
                shard=shard,
                out_npy=path,
                batch_size=cfg.batch_size,
                float16=cfg.float16,
            )
        paths.append(path)
    return paths


def index_pair(
    src_shards: Sequence[Path], tgt_shards: Sequence[Path], cfg: MineConfig, work_dir: Path
) -> dict[str, list[Path]]:
    """Train one quantizer on a sample of both sides, then assign every shard's rows to lists.

    Returns, per side, each shard's list assignment file.
    """
    trained = work_dir / "quantizer.npz"
    if not trained.exists():
        train_index(src_shards, tgt_shards, cfg.index, trained)
    files = {}
    for name, shards in (("src", src_shards), ("tgt", tgt_shards)):
        files[name] = []
        for shard, npy in enumerate(shards):
            lists = work_dir / f"{name}.{shard:04d}.lists.npz"
            if not lists.exists():
                fill_index(trained, npy, lists, nprobe=cfg.index.nprobe)
            files[name].append(lists)
    return files


def run_knn(
    src_shards: Sequence[Path],
    tgt_shards: Sequence[Path],
    plans: tuple[ShardPlan, ShardPlan],
    *,
    cfg: MineConfig,
    out_dir: Path,
) -> tuple[KNN, KNN]:
    """All shard pairs (skipping parts already on disk), reduced to global fwd/bwd kNN."""
    src_plan, tgt_plan = plans
    lists = None
    if uses_ivf(src_plan.n_lines, tgt_plan.n_lines, cfg.index):
        lists = index_pair(src_shards, tgt_shards, cfg, out_dir)
    parts = []
    for s, src_npy in enumerate(src_shards):
        for t, tgt_npy in enumerate(tgt_shards):
            part = out_dir / f"knn.{s:04d}-{t:04d}.npz"
            if not part.exists():
                knn_shard_pair(
                    src_npy=src_npy,
                    tgt_npy=tgt_npy,
                    src_plan=src_plan,
                    tgt_plan=tgt_plan,
                    src_shard=s,
                    tgt_shard=t,
                    k=cfg.k,
                    out_npz=part,
                    block_size=cfg.block_size,
                    src_lists=load_lists(lists["src"][s]) if lists else None,
                    tgt_lists=load_lists(lists["tgt"][t]) if lists else None,
                )
            parts.append(part)
    return reduce_parts(parts, cfg.k, src_plan, tgt_plan)


def knn_for_files(
    model,
    src_path,
    tgt_path,
    *,
    cfg: MineConfig,
    work_dir,
    fields: tuple[Fields, Fields] = (Fields(), Fields()),
) -> tuple[KNN, KNN, dict, dict[str, Side]]:
    """Embed both corpora (read through their ``fields``: source, target) in shards and
    compute the global two-way kNN.

    Returns ``fwd``, ``bwd``, the timings, and each side as prepared (row ``i`` of the kNN
    lists is line ``i`` of its sharded text: blank input lines are not in it).
    """
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    sides = {
        "src": prepare_side(src_path, cfg, work_dir, "src", fields[0]),
        "tgt": prepare_side(tgt_path, cfg, work_dir, "tgt", fields[1]),
    }
    for path, side in zip((src_path, tgt_path), sides.values(), strict=True):
        if side.plan.n_lines == 0:
            raise InputError(
                f"{path}: empty corpus (no lines to mine; {side.plan.blank_lines} blank line(s))"
            )
    src, tgt = sides.values()
    src_shards = embed_side(model, src.text, src.plan, cfg=cfg, work_dir=work_dir, name="src")
    tgt_shards = embed_side(model, tgt.text, tgt.plan, cfg=cfg, work_dir=work_dir, name="tgt")
    t1 = time.perf_counter()
    fwd, bwd = run_knn(src_shards, tgt_shards, (src.plan, tgt.plan), cfg=cfg, out_dir=work_dir)
    return fwd, bwd, {"embed": t1 - t0, "knn": time.perf_counter() - t1}, sides


def mined_outputs(out_path: str | os.PathLike) -> dict[str, Path]:
    """The files a run writes for the output ``out_path``, by role: the pairs, and beside them
    ``<stem>.stats.json`` and ``<stem>.histogram.png`` (the names the workflow uses), and its
    own work dir ``<output>.work``."""
    out = Path(out_path)
    stem = out.name.removesuffix(".gz").removesuffix(".tsv").removesuffix(".parquet")
    return {
        "pairs": out,
        "stats": out.with_name(f"{stem}.stats.json"),
        "histogram": out.with_name(f"{stem}.histogram.png"),
        "work_dir": out.with_name(out.name + ".work"),
    }


def mine_files(
    model,
    src_path: str | os.PathLike,
    tgt_path: str | os.PathLike,
    *,
    cfg: MineConfig,
    out_path: str | os.PathLike,
    work_dir: str | os.PathLike | None = None,
    stats_json: str | os.PathLike | None = None,
    histogram_png: str | os.PathLike | None = None,
    model_dir: str | os.PathLike | None = None,
    fields: tuple[Fields, Fields] = (Fields(), Fields()),
    languages: tuple[str, str] | None = None,
    provenance: bool = False,
    out_format: Format = "tsv",
) -> dict:
    """Mine two corpus files (text, JSON Lines or Parquet: :mod:`psp.data.sentence_files`, read
    through their ``fields``, source and target) into ``out_path``; returns the stats dict.

    ``work_dir`` None uses ``<output>.work``, the run's own: removed after success, kept after a
    crash for the rerun to resume (see :mod:`psp.mine.workdir`). ``model_dir``, the directory
    ``model`` was loaded from, puts its files' checksums in the work dir's manifest, so that
    shards embedded by another model are never reused. ``stats_json`` and ``histogram_png``
    default to the names of :func:`mined_outputs`. ``languages`` (source, target) are the
    pair's, for the pair filters' language check; ``provenance`` adds each side's input line
    (and document id, for a side whose fields name one) to the output, written as
    ``out_format``.
    """
    names = mined_outputs(out_path)
    stats_json = stats_json or names["stats"]
    histogram_png = histogram_png or names["histogram"]
    if cfg.filters.pair_langid and languages:
        check_languages_known(languages)
    owned = work_dir is None
    model_files = [Path(model_dir) / name for name in MODEL_FILES] if model_dir else []
    settings = {key: getattr(cfg, key) for key in ("k", "n_shards", "float16")}
    settings["index"] = dataclasses.asdict(cfg.index) if cfg.index else None
    settings["fields"] = [dataclasses.asdict(side) for side in fields]
    manifest = fingerprint(model_files, {"src": src_path, "tgt": tgt_path}, settings)
    with claimed(names["work_dir"] if owned else work_dir, manifest, owned) as work:
        fwd, bwd, timings, sides = knn_for_files(
            model, src_path, tgt_path, cfg=cfg, work_dir=work, fields=fields
        )
        src, tgt = sides.values()
        inputs = {
            "src_file": str(src_path),
            "tgt_file": str(tgt_path),
            "blank_lines": {"src": src.plan.blank_lines, "tgt": tgt.plan.blank_lines},
        }
        with_ids = (fields[0].doc_id is not None, fields[1].doc_id is not None)
        return write_mined(
            src.text,
            tgt.text,
            fwd=fwd,
            bwd=bwd,
            cfg=cfg,
            out_path=names["pairs"],
            stats_json=stats_json,
            histogram_png=histogram_png,
            timings=timings,
            inputs=inputs,
            languages=languages,
            origins=Origins(src.origins, tgt.origins, with_ids) if provenance else None,
            out_format=out_format,
        )


def _write_sentences(sentences: Sequence[str], path: Path) -> None:
    """One sentence per line; embedded newlines would shift line numbers, so they become spaces."""
    with atomic_open(path, "wt") as out:
        for sentence in sentences:
            out.write(" ".join(sentence.splitlines()) + "\n")


def mine_texts(
    model,
    src_sentences: Sequence[str],
    tgt_sentences: Sequence[str],
    *,
    cfg: MineConfig | None = None,
    work_dir: str | os.PathLike | None = None,
    languages: tuple[str, str] | None = None,
) -> list[tuple[float, int, int]]:
    """Mine two in-memory sentence lists; returns ``(score, src_index, tgt_index)`` best first.

    Shards go to a fresh temporary folder (inside ``work_dir`` when given, else in the system
    temp directory) removed afterwards, and swept by a later call if this process is killed
    (:func:`psp.io.temp_dir`).

    Pairs below ``cfg.effective_threshold`` are dropped, and so are those ``cfg.filters``
    remove (their language check needs ``languages``, source and target); pass
    ``threshold=-math.inf`` and ``filters=PairFilterConfig.none()`` to get every retrieved
    candidate.

    Example:
        >>> cfg = MineConfig(threshold=-math.inf)
        >>> pairs = mine_texts(model, ["hola mundo"], ["hello world"], cfg=cfg)
    """
    cfg = cfg or MineConfig()
    for name, sentences in (("source", src_sentences), ("target", tgt_sentences)):
        if len(sentences) == 0:
            raise InputError(f"mine_texts: empty {name} corpus")
    with temp_dir("psp-mine", work_dir) as work:
        src_path, tgt_path = work / "src.txt", work / "tgt.txt"
        _write_sentences(src_sentences, src_path)
        _write_sentences(tgt_sentences, tgt_path)
        fwd, bwd, _, _ = knn_for_files(model, src_path, tgt_path, cfg=cfg, work_dir=work / "shards")
    scores, src, tgt = score_pairs(
        fwd, bwd, k=cfg.k, margin_kind=cfg.margin, retrieval=cfg.retrieval
    )
    above = scores >= cfg.effective_threshold
    scores, src, tgt = scores[above], src[above], tgt[above]
    reasons = filter_reasons(
        scores,
        [src_sentences[i] for i in src.tolist()],
        [tgt_sentences[j] for j in tgt.tolist()],
        cfg.filters,
        languages,
    )
    keep = reasons == KEPT
    return list(zip(scores[keep].tolist(), src[keep].tolist(), tgt[keep].tolist(), strict=True))


def all_candidates(cfg: MineConfig) -> MineConfig:
    """The same settings with no threshold and no pair filter: every candidate, for tuning
    the threshold (the filters are applied to the candidates by the caller)."""
    return dataclasses.replace(cfg, threshold=-math.inf, filters=PairFilterConfig.none())
