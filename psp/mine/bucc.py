"""BUCC-style mining evaluation: find gold translation pairs hidden among unrelated sentences.

Two kinds of task, each a dev task that chooses the threshold (maximum F1) and a test task that
applies it unchanged, as in Artetxe & Schwenk (2019):

- BUCC 2018 itself (refs ``bucc2018/{xx}-en/{xx}-en.{split}``, downloaded from
  comparable.limsi.fr): XTREME's convention, ``sample`` as dev and ``training`` as test (the
  ``test`` split's gold was never published). See :func:`load_bucc2018_task`.
- A task rebuilt the same way from open data, for pairs and data mirrors without BUCC: gold pairs
  from a parallel test set, shuffled into monolingual sentences on each side that have no
  translation on the other side.

Default data of a rebuilt task (paths under the data mirror, see ``BuccData``):

- dev gold: ``bitext/es-en/tico19-test``; test gold: ``bitext/es-en/ntrex128``.
- English distractors: ``mono/en/wmt-newstest-en.txt.gz`` (it excludes every English sentence of
  ``bitext/``, so none translates a Spanish sentence of the task).
- Spanish distractors: the Spanish side of ``bitext/es-en/wmt-newstest`` and
  ``un-v1.0-dev-test``; their English sides are in ``bitext/`` and therefore absent from the
  English distractors, so they too have no partner. The Quijote is not used: literary 17th
  century paragraphs are too easy to tell apart from news and COVID text.

Each pool is split by a seeded permutation into disjoint dev and test halves.

The dev optimum is also what a mined pair's ``threshold: auto`` resolves to
(:func:`mining_threshold`), so a pair with a BUCC-style evaluation mines at the threshold its
own model's dev task chose.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from psp.io import InputError, atomic_open, atomic_path, read_lines
from psp.mine.config import AUTO_THRESHOLD, DEFAULT_THRESHOLDS, MineConfig, PairFilterConfig
from psp.mine.pair_filters import KEPT, REASONS, filter_reasons
from psp.mine.pipeline import all_candidates, mine_texts

log = logging.getLogger(__name__)

Gold = set[tuple[int, int]]


@dataclass(frozen=True)
class Curve:
    """Precision/recall/F1 when keeping every candidate scoring at least ``thresholds[i]``."""

    thresholds: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray


def _dedupe(lines: Sequence[str], exclude: set[str] = frozenset()) -> list[str]:
    seen, out = set(exclude), []
    for line in lines:
        key = line.strip()
        if key and key not in seen:
            seen.add(key)
            out.append(line)
    return out


def build_bucc_task(
    gold_src: Sequence[str],
    gold_tgt: Sequence[str],
    *,
    distractor_src: Sequence[str],
    distractor_tgt: Sequence[str],
    seed: int = 0,
) -> tuple[list[str], list[str], Gold]:
    """Shuffle gold pairs into distractors; returns ``(src_sentences, tgt_sentences, gold)``.

    Gold pairs are made one-to-one: a pair whose source or target sentence already occurred in
    an earlier gold pair (or is blank) is dropped, since one sentence cannot be in two places.
    Distractors are deduplicated and anything equal to a gold sentence of the same side removed.
    ``gold`` holds ``(src_index, tgt_index)`` in the shuffled lists.
    """
    if len(gold_src) != len(gold_tgt):
        raise ValueError(f"gold sides differ in length: {len(gold_src)} vs {len(gold_tgt)}")
    seen_src, seen_tgt, pairs = set(), set(), []
    for s, t in zip(gold_src, gold_tgt, strict=True):
        ks, kt = s.strip(), t.strip()
        if ks and kt and ks not in seen_src and kt not in seen_tgt:
            seen_src.add(ks)
            seen_tgt.add(kt)
            pairs.append((s, t))
    d_src = _dedupe(distractor_src, seen_src)
    d_tgt = _dedupe(distractor_tgt, seen_tgt)
    rng = np.random.default_rng(seed)
    src = [s for s, _ in pairs] + d_src
    tgt = [t for _, t in pairs] + d_tgt
    src_perm, tgt_perm = rng.permutation(len(src)), rng.permutation(len(tgt))
    src_pos, tgt_pos = np.argsort(src_perm), np.argsort(tgt_perm)  # old index -> new position
    gold = {(int(src_pos[g]), int(tgt_pos[g])) for g in range(len(pairs))}
    return [src[i] for i in src_perm], [tgt[i] for i in tgt_perm], gold


def precision_recall_curve(
    scores: np.ndarray, src: np.ndarray, tgt: np.ndarray, gold: Gold
) -> Curve:
    """P/R/F1 at every distinct candidate score (ties are kept or dropped together)."""
    order = np.argsort(-np.asarray(scores), kind="stable")
    scores = np.asarray(scores)[order]
    hits = np.array(
        [
            (int(i), int(j)) in gold
            for i, j in zip(np.asarray(src)[order], np.asarray(tgt)[order], strict=True)
        ],
        dtype=bool,
    )
    tp = np.cumsum(hits)
    kept = np.arange(1, len(scores) + 1)
    last_of_tie = np.append(scores[1:] != scores[:-1], True) if len(scores) else np.zeros(0, bool)
    tp, kept, thresholds = tp[last_of_tie], kept[last_of_tie], scores[last_of_tie]
    precision = tp / kept
    recall = tp / max(len(gold), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(tp > 0, 2 * precision * recall / (precision + recall), 0.0)
    return Curve(thresholds, precision, recall, f1)


def best_threshold(curve: Curve) -> tuple[float, float]:
    """The threshold with maximum F1 on ``curve`` (the first, i.e. highest, on ties) and that F1."""
    if len(curve.f1) == 0:
        raise ValueError("best_threshold: empty curve (no candidates)")
    best = int(np.argmax(curve.f1))
    return float(curve.thresholds[best]), float(curve.f1[best])


def evaluate_at(
    scores: np.ndarray, src: np.ndarray, tgt: np.ndarray, *, gold: Gold, threshold: float
) -> dict[str, float]:
    """Precision, recall and F1 of the candidates scoring at least ``threshold``."""
    keep = np.asarray(scores) >= threshold
    mined = set(zip(np.asarray(src)[keep].tolist(), np.asarray(tgt)[keep].tolist(), strict=True))
    tp = len(mined & gold)
    precision = tp / len(mined) if mined else 0.0
    recall = tp / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "mined": len(mined),
        "gold": len(gold),
    }


def plot_pr_curves(
    curves: dict[str, Curve], marks: dict[str, dict], out_png: str | os.PathLike
) -> Path:
    """Precision-recall curves, one per split, with the operating point of each marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.5), dpi=120)
    for name, curve in curves.items():
        (line,) = ax.plot(curve.recall, curve.precision, label=name)
        if name in marks:
            m = marks[name]
            ax.plot(
                m["recall"],
                m["precision"],
                "o",
                color=line.get_color(),
                label=f"{name} @ {m['threshold']:.3f}: F1 {m['f1']:.3f}",
            )
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return Path(out_png)


def plot_score_distributions(
    candidates: dict[str, Candidates], threshold: float, out_png: str | os.PathLike
) -> Path:
    """The margin scores of gold and of other candidates, dev and test side by side, with the
    dev threshold: whether the threshold sits where the two tasks separate their gold alike."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(candidates), figsize=(5 * len(candidates), 3.6), dpi=110)
    every = np.concatenate([c.scores for c in candidates.values()])
    bins = np.linspace(np.percentile(every, 1), every.max(), 60) if len(every) else 10
    for ax, (split, c) in zip(np.atleast_1d(axes), candidates.items(), strict=True):
        is_gold = np.array([(a, b) in c.gold for a, b in zip(c.i.tolist(), c.j.tolist())], bool)
        ax.hist(c.scores[~is_gold], bins=bins, alpha=0.6, label="other candidates", log=True)
        ax.hist(c.scores[is_gold], bins=bins, alpha=0.6, label="gold pairs", log=True)
        ax.axvline(threshold, color="black", lw=1, ls="--", label=f"dev threshold {threshold:.3f}")
        ax.set_title(f"{split}: {int(is_gold.sum())} of {len(c.gold)} gold pairs retrieved")
        ax.set_xlabel("margin score")
        ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return Path(out_png)


@dataclass
class BuccData:
    """Where the BUCC-style task's sentences come from, relative to the data mirror root."""

    dev_gold: str = "bitext/es-en/tico19-test"
    test_gold: str = "bitext/es-en/ntrex128"
    src_lang: str = "es"
    tgt_lang: str = "en"
    src_distractors: tuple[str, ...] = (
        "bitext/es-en/wmt-newstest.es.gz",
        "bitext/es-en/un-v1.0-dev-test.es.gz",
    )
    tgt_distractors: tuple[str, ...] = ("mono/en/wmt-newstest-en.txt.gz",)
    n_distractors: int = 10_000  # per side and split
    max_gold: int | None = None  # None: all gold pairs
    seed: int = 0


BUCC2018_PREFIX = "bucc2018/"


def load_bucc2018_task(
    data_root: str | os.PathLike, ref: str, src_lang: str, tgt_lang: str
) -> tuple[list[str], list[str], Gold]:
    """One split of BUCC 2018 (``bucc2018/de-en/de-en.sample``): both sides' sentences in file
    order and the gold as ``(src_index, tgt_index)``.

    Scored at the level of sentence ids, as the shared task's gold is: a mined pair counts when
    its two ids are a gold line, so a sentence repeated under another id is not a hit.
    """
    base = Path(data_root) / ref
    index, sentences = {}, {}
    for lang in (src_lang, tgt_lang):
        rows = [line.split("\t", 1) for line in read_lines(f"{base}.{lang}")]
        bad = next((i for i, row in enumerate(rows, 1) if len(row) != 2), None)
        if bad is not None:
            raise InputError(f"{base}.{lang}:{bad}: expected id<TAB>sentence")
        index[lang] = {row[0]: i for i, row in enumerate(rows)}
        sentences[lang] = [row[1] for row in rows]
    gold = set()
    for lineno, line in enumerate(read_lines(f"{base}.gold"), 1):
        src_id, _, tgt_id = line.partition("\t")
        if src_id not in index[src_lang] or tgt_id not in index[tgt_lang]:
            raise InputError(f"{base}.gold:{lineno}: {line!r} names an id of no sentence")
        gold.add((index[src_lang][src_id], index[tgt_lang][tgt_id]))
    return sentences[src_lang], sentences[tgt_lang], gold


def load_tasks(
    data_root: str | os.PathLike, data: BuccData
) -> dict[str, tuple[list[str], list[str], Gold]]:
    """The dev and test tasks: BUCC 2018's splits, or tasks built from the mirror with disjoint
    distractor halves."""
    root = Path(data_root)
    if data.dev_gold.startswith(BUCC2018_PREFIX):
        return {
            split: load_bucc2018_task(root, ref, data.src_lang, data.tgt_lang)
            for split, ref in (("dev", data.dev_gold), ("test", data.test_gold))
        }
    rng = np.random.default_rng(data.seed)
    golds = {
        split: (
            read_lines(root / f"{gold_id}.{data.src_lang}.gz"),
            read_lines(root / f"{gold_id}.{data.tgt_lang}.gz"),
        )
        for split, gold_id in (("dev", data.dev_gold), ("test", data.test_gold))
    }
    gold_sides = {
        side: {line.strip() for pair in golds.values() for line in pair[k]}
        for k, side in enumerate(("src", "tgt"))
    }
    pools = {}
    for side, files in (("src", data.src_distractors), ("tgt", data.tgt_distractors)):
        other = "tgt" if side == "src" else "src"
        lines = [line for f in files for line in _distractors(root, f, data, gold_sides[other])]
        perm = rng.permutation(len(lines))
        half = len(lines) // 2
        pools[side] = {
            "dev": [lines[i] for i in perm[:half][: data.n_distractors]],
            "test": [lines[i] for i in perm[half:][: data.n_distractors]],
        }
    if data.dev_gold == data.test_gold:
        golds = _split_gold(*golds["dev"], rng)
    return {
        split: build_bucc_task(
            gold_src[: data.max_gold],
            gold_tgt[: data.max_gold],
            distractor_src=pools["src"][split],
            distractor_tgt=pools["tgt"][split],
            seed=data.seed,
        )
        for split, (gold_src, gold_tgt) in golds.items()
    }


def _distractors(root: Path, ref: str, data: BuccData, gold_other: set[str]) -> list[str]:
    """The lines of a distractor file, less those that translate a gold sentence.

    A side of a bitext corpus (``bitext/{pair}/{corpus}.{lang}.gz``) may hold another
    translation of a gold sentence: the WMT19 references of the newstest2019 English that
    NTREX-128 translated are in the ru-, zh- and de-en newstest corpora. Mined, such a line is
    a correct translation that the task would count as an error (and the gold pair it hides, a
    miss), so a line that is aligned, anywhere in the corpus, with a gold sentence of the other
    side is left out, every copy of it.
    """
    lines = read_lines(root / ref)
    corpus, _, lang = ref.removesuffix(".gz").rpartition(".")
    languages = (data.src_lang, data.tgt_lang)
    if not ref.startswith("bitext/") or lang not in languages:
        return lines
    other_lang = languages[1 - languages.index(lang)]
    aligned = root / f"{corpus}.{other_lang}.gz"
    if not aligned.exists():
        return lines
    pairs = list(zip(lines, read_lines(aligned), strict=True))
    translating = {line.strip() for line, other in pairs if other.strip() in gold_other}
    return [line for line in lines if line.strip() not in translating]


def dev_gold_pairs(data_root: str | os.PathLike, data: BuccData) -> tuple[list[str], list[str]]:
    """The gold translation pairs of the dev task, exactly as :func:`load_tasks` builds it:
    held-out bitext a model's training may be tuned on (best-epoch selection) without touching
    the test task's gold."""
    if data.dev_gold.startswith(BUCC2018_PREFIX):
        src, tgt, gold = load_bucc2018_task(data_root, data.dev_gold, data.src_lang, data.tgt_lang)
    else:
        src, tgt, gold = load_tasks(data_root, data)["dev"]
    pairs = sorted(gold)
    return [src[i] for i, _ in pairs], [tgt[j] for _, j in pairs]


def _split_gold(
    src: list[str], tgt: list[str], rng: np.random.Generator
) -> dict[str, tuple[list[str], list[str]]]:
    """Disjoint random halves of one gold corpus, for a language pair with a single test set.

    Some pairs have one held-out parallel set only (de-en and tr-en lack TICO-19); tuning the
    threshold on one half and reporting on the other keeps dev and test gold apart.
    """
    if len(src) != len(tgt):
        raise ValueError(f"gold sides differ in length: {len(src)} vs {len(tgt)}")
    perm = rng.permutation(len(src))
    halves = {"dev": np.sort(perm[: len(perm) // 2]), "test": np.sort(perm[len(perm) // 2 :])}
    return {
        split: ([src[i] for i in rows], [tgt[i] for i in rows]) for split, rows in halves.items()
    }


#: The figure :func:`run_bucc` writes beside ``bucc.json``: dev and test score distributions.
SCORES_PNG = "score_distributions.png"


@dataclass(frozen=True)
class Candidates:
    """The scored candidates of one split of a task: ``scores``, their source and target ids
    ``i`` and ``j``, and the task's sentences and gold."""

    scores: np.ndarray
    i: np.ndarray
    j: np.ndarray
    src: list[str]
    tgt: list[str]
    gold: Gold


def task_candidates(model, data_root, data: BuccData, cfg: MineConfig) -> dict[str, Candidates]:
    """Every split's candidates as the miner scores them (kNN, margin, retrieval of ``cfg``),
    with no threshold and no pair filter: dev first."""
    candidates = {}
    for split, (src, tgt, gold) in load_tasks(data_root, data).items():
        mined = mine_texts(model, src, tgt, cfg=all_candidates(cfg))
        scores, i, j = (
            (np.asarray(col) for col in zip(*mined, strict=True)) if mined else (np.zeros(0),) * 3
        )
        candidates[split] = Candidates(
            scores, i.astype(np.int64), j.astype(np.int64), src, tgt, gold
        )
    return candidates


def evaluate_filtered(
    candidates: dict[str, Candidates], filters: PairFilterConfig, languages: tuple[str, str]
) -> tuple[dict[str, dict], dict[str, Curve]]:
    """Each split's precision, recall and F1 at the dev optimum of the candidates that pass
    ``filters`` (what mining writes), its curve and its own optimum (``own_optimum``: the
    threshold and F1 a split would have had tuned on itself; for the test split, what the dev
    threshold gives up), and beside it the same evaluation without
    the filters (``without_filters``: its own dev optimum) and what each filter removed of
    the gold and of the other pairs that the unfiltered output holds (``removed``:
    ``{reason: {"gold": n, "other": n}}``).
    """
    results, curves = {}, {}
    thresholds: dict[str, float] = {}  # the dev optimum, with and without the filters
    for split, c in candidates.items():
        reasons = filter_reasons(
            c.scores, [c.src[x] for x in c.i], [c.tgt[y] for y in c.j], filters, languages
        )
        evaluated = {}
        kept = reasons == KEPT
        for name, keep in (("filtered", kept), ("without_filters", np.ones_like(kept))):
            curve = precision_recall_curve(c.scores[keep], c.i[keep], c.j[keep], c.gold)
            thresholds.setdefault(name, best_threshold(curve)[0])  # dev comes first
            evaluated[name] = {
                "threshold": thresholds[name],
                **evaluate_at(
                    c.scores[keep], c.i[keep], c.j[keep], gold=c.gold, threshold=thresholds[name]
                ),
            }
            if name == "filtered":
                curves[split] = curve
                own_threshold, own_f1 = best_threshold(curve)
                evaluated[name]["own_optimum"] = {"threshold": own_threshold, "f1": own_f1}
        output = c.scores >= thresholds["without_filters"]  # what mining without filters keeps
        results[split] = {
            **evaluated["filtered"],
            "n_src": len(c.src),
            "n_tgt": len(c.tgt),
            "without_filters": evaluated["without_filters"],
            "removed": _removed_by_kind(reasons[output], c.i[output], c.j[output], c.gold),
        }
    return results, curves


def run_bucc(
    model,
    data_root: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    cfg: MineConfig | None = None,
    data: BuccData | None = None,
) -> dict:
    """Tune the threshold on dev, report P/R/F1 on test; writes ``bucc.json``, ``pr_curve.png``
    and ``score_distributions.png``.

    Candidates come from :func:`mine_texts` with the threshold removed, so exactly the mining
    path (kNN, margin, retrieval) is evaluated, and then go through the pair filters
    (``cfg.filters``), so the F1 is that of what mining writes (:func:`evaluate_filtered`).
    """
    cfg, data = cfg or MineConfig(), data or BuccData()
    candidates = task_candidates(model, data_root, data, cfg)
    splits, curves = evaluate_filtered(candidates, cfg.filters, (data.src_lang, data.tgt_lang))
    for split, result in splits.items():
        log.info("BUCC %s: %s", split, result)
    results = {
        "margin": cfg.margin,
        "retrieval": cfg.retrieval,
        "k": cfg.k,
        "filters": cfg.filters.to_dict(),
        **splits,
    }
    out_dir = Path(out_dir)
    with atomic_open(out_dir / "bucc.json", "wt") as out:
        json.dump(results, out, indent=2)
    marks = {
        split: {key: result[key] for key in ("threshold", "precision", "recall", "f1")}
        for split, result in splits.items()
    }
    plot_pr_curves(curves, marks, out_dir / "pr_curve.png")
    plot_score_distributions(candidates, splits["dev"]["threshold"], out_dir / SCORES_PNG)
    return results


def _removed_by_kind(reasons, i, j, gold: Gold) -> dict[str, dict[str, int]]:
    """For each filter, the gold and the other pairs (``i``, ``j``) that it removed."""
    is_gold = np.array(
        [(a, b) in gold for a, b in zip(i.tolist(), j.tolist(), strict=True)], dtype=bool
    )
    return {
        reason: {
            "gold": int(((reasons == code) & is_gold).sum()),
            "other": int(((reasons == code) & ~is_gold).sum()),
        }
        for code, reason in enumerate(REASONS)
    }


def config_with_threshold(
    entry: dict, bucc_json: str | os.PathLike | None = None
) -> tuple[MineConfig, dict]:
    """The :class:`MineConfig` of a pair's mining settings whose ``threshold`` may be ``auto``,
    with the threshold resolved by :func:`mining_threshold`, and where it came from."""
    settings = dict(entry)
    threshold = settings.pop("threshold", AUTO_THRESHOLD)
    cfg = MineConfig.from_dict(settings)
    value, source = mining_threshold(threshold, cfg, bucc_json)
    return dataclasses.replace(cfg, threshold=value), source


def mining_threshold(
    threshold: float | str, cfg: MineConfig, bucc_json: str | os.PathLike | None = None
) -> tuple[float, dict]:
    """The threshold a pair mines at, and where it came from (for the mined file's stats).

    A number is used as given. ``auto`` is the dev optimum of the pair's BUCC-style evaluation
    (``bucc_json``, written by :func:`run_bucc` with the same k, margin and retrieval, so the
    score is on the same scale), or, for a pair without one, the fixed default of the margin
    (:data:`DEFAULT_THRESHOLDS`: 1.06 for ``ratio``, the cut LASER used for CCMatrix).
    """
    if threshold != AUTO_THRESHOLD:
        return float(threshold), {"from": "config"}
    if bucc_json is None:
        return DEFAULT_THRESHOLDS[cfg.margin], {
            "from": "default",
            "why": f"no BUCC-style evaluation of this pair; the {cfg.margin} margin's default",
        }
    try:
        with open(bucc_json, encoding="utf-8") as handle:
            result = json.load(handle)
        dev = result["dev"]
        value, f1 = float(dev["threshold"]), float(dev["f1"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InputError(f"{bucc_json}: no dev threshold to mine at ({err!r})") from err
    for key in ("k", "margin", "retrieval"):
        if result.get(key) != getattr(cfg, key):
            raise InputError(
                f"{bucc_json}: tuned with {key} {result.get(key)!r}, but the pair mines with "
                f"{getattr(cfg, key)!r}; its dev optimum is on another scale"
            )
    if result.get("filters") != cfg.filters.to_dict():
        raise InputError(
            f"{bucc_json}: tuned on pairs filtered with {result.get('filters')!r}, but the pair "
            f"mines with {cfg.filters.to_dict()!r}; its dev optimum is another output's"
        )
    return value, {"from": "bucc_dev", "file": str(bucc_json), "dev_f1": f1}
