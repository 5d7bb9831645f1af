"""What each pair filter removes from the BUCC-style tasks of the default run, and its F1.

For each pair the task of its ``bucc`` entry in ``config.yaml`` is mined once with the pair's
trained model (every candidate, no threshold: ``psp.mine.bucc.task_candidates``), then
evaluated under each filter setting as the workflow's ``evaluate_bucc`` evaluates it
(``psp.mine.bucc.evaluate_filtered``): the threshold that maximises F1 on the dev task's
filtered candidates, precision, recall and F1 at it on the test task, and, for each filter,
the gold pairs and the other pairs it removed from what mining without filters keeps (at that
setting's own dev optimum).

Settings: every filter off, the defaults, each filter alone (the others off) at a few values.
Printed: one JSON line per pair and setting, and one per pair for the data stage's language
rule in place of the pair filters' (``data_stage_langid``: a side fails unless langid.py names
its own language with probability 0.5, ``psp.data.filters.language.LangidCheck``): the gold and
other pairs of each split's unfiltered output it would remove, and the languages it named.

Usage:
    python benchmarks/bench_pair_filters.py --mirror /work/shared/data \\
        --models results/models --pairs es-en ru-en zh-en ar-en
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import yaml

from psp.mine.config import PairFilterConfig

REPO = Path(__file__).resolve().parents[1]
NONE = PairFilterConfig.none()


def settings(max_scores: list[float]) -> dict[str, PairFilterConfig]:
    """Every filter off, the defaults, and each filter alone at the values measured."""
    alone = {"dedup": dataclasses.replace(NONE, dedup=True)}
    alone["pair_langid"] = dataclasses.replace(NONE, pair_langid=True)
    for overlap in (0.3, 0.5, 0.7, 0.9):
        alone[f"max_overlap {overlap}"] = dataclasses.replace(NONE, max_overlap=overlap)
    for ratio in (1.5, 2.0, 2.5, 3.0, 4.0):
        alone[f"max_length_ratio {ratio}"] = dataclasses.replace(NONE, max_length_ratio=ratio)
    for score in max_scores:
        alone[f"max_score {score}"] = dataclasses.replace(NONE, max_score=score)
    return {"none": NONE, "default": PairFilterConfig(), **alone}


def data_stage_langid(candidates, languages, threshold: float) -> dict:
    """What the data stage's language rule would remove from the pairs above ``threshold``."""
    from collections import Counter

    from psp.data.filters.language import LangidCheck, load_identifier

    out = candidates.scores >= threshold
    i, j = candidates.i[out].tolist(), candidates.j[out].tolist()
    gold = [(a, b) in candidates.gold for a, b in zip(i, j, strict=True)]
    failed, named = [False] * len(i), Counter()
    identifier = load_identifier(None)
    for texts, lang in zip(
        ([candidates.src[a] for a in i], [candidates.tgt[b] for b in j]), languages, strict=True
    ):
        passed = LangidCheck((lang,), 0.5, None)([(text,) for text in texts])
        top, _ = identifier.identify([t for t, ok in zip(texts, passed, strict=True) if not ok])
        named.update(identifier.languages[k] for k in top.tolist())
        failed = [f or not ok for f, ok in zip(failed, passed, strict=True)]
    return {
        "gold": sum(f and g for f, g in zip(failed, gold, strict=True)),
        "other": sum(f and not g for f, g in zip(failed, gold, strict=True)),
        "gold_in_output": sum(gold),
        "other_in_output": len(gold) - sum(gold),
        "languages_named": dict(named.most_common(6)),
    }


def bucc_entry(pair: str) -> dict:
    """The pair's ``bucc`` entry of config.yaml, with the schema's default distractor count."""
    from psp.config_schema import schema

    entry = yaml.safe_load((REPO / "config.yaml").read_text())["bucc"][pair]
    keys = schema()["properties"]["bucc"]["additionalProperties"]["properties"]
    return {"max_distractors": keys["max_distractors"]["default"], **entry}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, required=True)
    parser.add_argument("--models", type=Path, required=True, help="folder of model dirs")
    parser.add_argument("--pairs", nargs="+", required=True)
    parser.add_argument(
        "--max-scores", nargs="*", type=float, default=[1.3, 1.4, 1.5, 1.6, 1.8, 2.0]
    )
    parser.add_argument(
        "--max-distractors", type=int, default=None, help="per side (default: the config's)"
    )
    args = parser.parse_args()

    import psp
    from psp.mine.bucc import BuccData, evaluate_filtered, task_candidates
    from psp.mine.config import MineConfig
    from psp.workflow import jobs

    for pair in args.pairs:
        entry = bucc_entry(pair)
        if args.max_distractors is not None:
            entry["max_distractors"] = args.max_distractors
        data = BuccData(**jobs.bucc_data(entry, pair))
        t0 = time.perf_counter()
        candidates = task_candidates(psp.load(args.models / pair), args.mirror, data, MineConfig())
        mined_s = time.perf_counter() - t0
        for name, filters in settings(args.max_scores).items():
            t0 = time.perf_counter()
            results, _ = evaluate_filtered(candidates, filters, (data.src_lang, data.tgt_lang))
            row = {
                "pair": pair,
                "setting": name,
                "candidates": {split: len(c.scores) for split, c in candidates.items()},
                **{
                    split: {
                        key: result[key]
                        for key in ("threshold", "precision", "recall", "f1", "mined")
                    }
                    | {
                        "without_filters_f1": result["without_filters"]["f1"],
                        "removed": {k: v for k, v in result["removed"].items() if any(v.values())},
                    }
                    for split, result in results.items()
                },
                "seconds": {
                    "mine": round(mined_s, 1),
                    "filter": round(time.perf_counter() - t0, 1),
                },
            }
            print(json.dumps(row), flush=True)
        languages = (data.src_lang, data.tgt_lang)
        unfiltered, _ = evaluate_filtered(candidates, NONE, languages)
        rule = {
            split: data_stage_langid(c, languages, unfiltered[split]["threshold"])
            for split, c in candidates.items()
        }
        print(json.dumps({"pair": pair, "setting": "data_stage_langid", **rule}), flush=True)


if __name__ == "__main__":
    main()
