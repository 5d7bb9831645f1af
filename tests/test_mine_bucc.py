"""BUCC-style evaluation: task construction and precision/recall/F1 on constructed cases."""

from __future__ import annotations

import json

import numpy as np
import pytest

import psp
from psp.io import InputError, read_lines
from psp.mine import MineConfig
from psp.mine.bucc import (
    BuccData,
    best_threshold,
    build_bucc_task,
    config_with_threshold,
    dev_gold_pairs,
    evaluate_at,
    load_tasks,
    mining_threshold,
    plot_pr_curves,
    precision_recall_curve,
    run_bucc,
)

GOLD = {(0, 0), (1, 1), (2, 2)}
SCORES = np.array([0.6, 0.9, 0.7, 0.8])  # unsorted on purpose
SRC = np.array([3, 0, 1, 1])
TGT = np.array([3, 0, 1, 2])


#: de-en has no TICO-19: its dev and test gold both name ntrex128, split in two halves.
DE_NTREX = BuccData(
    dev_gold="bitext/de-en/ntrex128",
    test_gold="bitext/de-en/ntrex128",
    src_lang="de",
    src_distractors=("bitext/de-en/wmt-newstest.de.gz",),
    n_distractors=100,
)


def test_precision_recall_curve_by_hand():
    curve = precision_recall_curve(SCORES, SRC, TGT, GOLD)
    np.testing.assert_allclose(curve.thresholds, [0.9, 0.8, 0.7, 0.6])
    np.testing.assert_allclose(curve.precision, [1, 1 / 2, 2 / 3, 1 / 2])
    np.testing.assert_allclose(curve.recall, [1 / 3, 1 / 3, 2 / 3, 2 / 3])
    np.testing.assert_allclose(curve.f1, [1 / 2, 2 / 5, 2 / 3, 4 / 7])
    assert best_threshold(curve) == pytest.approx((0.7, 2 / 3))


def test_ties_are_kept_or_dropped_together():
    curve = precision_recall_curve(
        np.array([0.5, 0.5, 0.2]), np.array([0, 5, 1]), np.array([0, 5, 1]), GOLD
    )
    np.testing.assert_allclose(curve.thresholds, [0.5, 0.2])
    np.testing.assert_allclose(curve.precision, [1 / 2, 2 / 3])


def test_evaluate_at_threshold():
    result = evaluate_at(SCORES, SRC, TGT, gold=GOLD, threshold=0.7)
    assert result["mined"] == 3 and result["gold"] == 3
    assert result["precision"] == pytest.approx(2 / 3)
    assert result["recall"] == pytest.approx(2 / 3)
    assert result["f1"] == pytest.approx(2 / 3)
    assert evaluate_at(SCORES, SRC, TGT, gold=GOLD, threshold=0.95)["f1"] == 0.0


def test_build_bucc_task_hides_gold_among_deduped_distractors():
    gold_src = ["uno", "dos", "uno", "tres"]  # the second "uno" pair is not one-to-one: dropped
    gold_tgt = ["one", "two", "one again", "three"]
    src, tgt, gold = build_bucc_task(
        gold_src,
        gold_tgt,
        distractor_src=["cuatro", "dos", "cuatro", "cinco"],
        distractor_tgt=["four", "three", "six"],
        seed=1,
    )
    assert sorted(src) == ["cinco", "cuatro", "dos", "tres", "uno"]
    assert sorted(tgt) == ["four", "one", "six", "three", "two"]
    assert {(src[i], tgt[j]) for i, j in gold} == {
        ("uno", "one"),
        ("dos", "two"),
        ("tres", "three"),
    }
    again = build_bucc_task(
        gold_src,
        gold_tgt,
        distractor_src=["cuatro", "dos", "cuatro", "cinco"],
        distractor_tgt=["four", "three", "six"],
        seed=1,
    )
    assert again == (src, tgt, gold)


def test_pr_plot_is_written(tmp_path):
    curve = precision_recall_curve(SCORES, SRC, TGT, GOLD)
    mark = {"threshold": 0.7, **evaluate_at(SCORES, SRC, TGT, gold=GOLD, threshold=0.7)}
    out = plot_pr_curves({"dev": curve}, {"dev": mark}, tmp_path / "pr.png")
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_one_gold_corpus_is_split_into_disjoint_dev_and_test_halves(shared_data):
    """de-en has no TICO-19: dev and test name ntrex128, whose pairs are then split in two."""
    data = DE_NTREX
    tasks = load_tasks(shared_data, data)
    gold = {
        split: {(src[i], tgt[j]) for i, j in pairs} for split, (src, tgt, pairs) in tasks.items()
    }
    assert not gold["dev"] & gold["test"]
    assert abs(len(gold["dev"]) - len(gold["test"])) < 50
    # every gold pair is a line-aligned pair of the corpus, and together they cover it
    de = read_lines(shared_data / "bitext/de-en/ntrex128.de.gz")
    en = read_lines(shared_data / "bitext/de-en/ntrex128.en.gz")
    corpus = set(zip(de, en, strict=True))
    assert gold["dev"] | gold["test"] <= corpus
    assert len(gold["dev"]) + len(gold["test"]) > 0.95 * len(corpus)


def test_auto_threshold_is_the_dev_optimum_of_the_pairs_bucc_task(
    tiny_model, shared_data, tmp_path
):
    """``auto`` reads the threshold run_bucc chose on dev, with the same miner settings."""
    cfg = MineConfig(k=3)
    data = BuccData(n_distractors=150, max_gold=150)
    results = run_bucc(psp.load(tiny_model), shared_data, tmp_path, cfg=cfg, data=data)
    value, source = mining_threshold("auto", cfg, tmp_path / "bucc.json")
    assert value == results["dev"]["threshold"]
    assert source == {
        "from": "bucc_dev",
        "file": str(tmp_path / "bucc.json"),
        "dev_f1": results["dev"]["f1"],
    }
    with pytest.raises(InputError, match="bucc.json: tuned with k 3"):
        mining_threshold("auto", MineConfig(k=4), tmp_path / "bucc.json")


def test_fixed_and_default_thresholds():
    assert mining_threshold(1.2, MineConfig()) == (1.2, {"from": "config"})
    value, source = mining_threshold("auto", MineConfig())
    assert value == 1.06 and source["from"] == "default"
    assert mining_threshold("auto", MineConfig(margin="distance"))[0] == 0.04


def test_config_with_threshold_resolves_auto_without_changing_the_entry():
    entry = {"k": 3, "margin": "distance", "threshold": "auto"}
    cfg, source = config_with_threshold(entry)
    assert (cfg.k, cfg.margin, cfg.threshold, source["from"]) == (3, "distance", 0.04, "default")
    assert entry["threshold"] == "auto"
    cfg, source = config_with_threshold({**entry, "threshold": 1.1})
    assert (cfg.threshold, source) == (1.1, {"from": "config"})


def test_auto_threshold_names_a_bucc_file_without_a_dev_threshold(tmp_path):
    bucc = tmp_path / "bucc.json"
    bucc.write_text(json.dumps({"margin": "ratio", "retrieval": "max", "k": 4, "test": {}}))
    with pytest.raises(InputError, match="bucc.json: no dev threshold"):
        mining_threshold("auto", MineConfig(), bucc)


def test_dev_gold_pairs_are_the_dev_tasks_gold(shared_data):
    """What a bitext model is selected on: the dev task's gold pairs, never the test task's."""
    data = DE_NTREX
    src, tgt = dev_gold_pairs(shared_data, data)
    tasks = load_tasks(shared_data, data)
    as_pairs = {split: {(s[i], t[j]) for i, j in gold} for split, (s, t, gold) in tasks.items()}
    assert set(zip(src, tgt, strict=True)) == as_pairs["dev"]
    assert len(src) == len(as_pairs["dev"]) and not as_pairs["dev"] & as_pairs["test"]
    # a pair with its own dev corpus takes all of it (TICO-19: every line a distinct pair)
    es = BuccData(n_distractors=100)
    src, tgt = dev_gold_pairs(shared_data, es)
    corpus = list(
        zip(
            read_lines(shared_data / "bitext/es-en/tico19-test.es.gz"),
            read_lines(shared_data / "bitext/es-en/tico19-test.en.gz"),
            strict=True,
        )
    )
    assert set(zip(src, tgt, strict=True)) <= set(corpus)
    assert len(src) > 0.95 * len(corpus)


def _bucc2018(root, shared_data, lang: str = "de", n_gold: int = 150, n_extra: int = 600):
    """BUCC 2018's sample and training archives of ``lang``-en in the upstream layout, imported
    into ``root``: gold pairs from the mirror's NTREX-128, unpaired sentences from its newstest
    (German) and English news, disjoint between the splits."""
    from psp.data.sources import import_bucc2018
    from tests import upstream

    gold = list(
        zip(
            read_lines(shared_data / f"bitext/{lang}-en/ntrex128.{lang}.gz"),
            read_lines(shared_data / f"bitext/{lang}-en/ntrex128.en.gz"),
            strict=True,
        )
    )
    src = read_lines(shared_data / f"bitext/{lang}-en/wmt-newstest.{lang}.gz")
    tgt = read_lines(shared_data / "mono/en/wmt-newstest-en.txt.gz")
    archives = []
    root.mkdir(parents=True, exist_ok=True)
    for n, split in enumerate(("sample", "training")):
        part = slice(n * n_extra, (n + 1) * n_extra)
        data = upstream.bucc2018_split(
            lang, split, gold[n * n_gold : (n + 1) * n_gold], (src[part], tgt[part]), seed=n
        )
        archives.append(root / f"bucc2018-{lang}-en.{split}-gold.tar.bz2")
        archives[-1].write_bytes(data)
    import_bucc2018(archives, root, lang)
    return root


def test_bucc2018_tasks_are_the_splits_scored_by_id(tmp_path):
    from psp.mine.bucc import load_bucc2018_task

    folder = tmp_path / "bucc2018/de-en"
    folder.mkdir(parents=True)
    (folder / "de-en.sample.de").write_text("de-1\tEins.\nde-2\tZwei.\nde-3\tZwei.\n")
    (folder / "de-en.sample.en").write_text("en-7\tTwo.\nen-8\tOne.\n")
    (folder / "de-en.sample.gold").write_text("de-1\ten-8\nde-3\ten-7\n")
    src, tgt, gold = load_bucc2018_task(tmp_path, "bucc2018/de-en/de-en.sample", "de", "en")
    assert src == ["Eins.", "Zwei.", "Zwei."] and tgt == ["Two.", "One."]
    assert gold == {(0, 1), (2, 0)}
    # the repeated sentence's other id is not the gold pair
    assert evaluate_at(
        np.array([1.2, 1.1]), np.array([0, 1]), np.array([1, 0]), gold=gold, threshold=1.0
    )["precision"] == pytest.approx(0.5)
    (folder / "de-en.sample.gold").write_text("de-1\ten-8\nde-4\ten-7\n")
    with pytest.raises(InputError, match=r"de-en.sample.gold:2"):
        load_bucc2018_task(tmp_path, "bucc2018/de-en/de-en.sample", "de", "en")
    (folder / "de-en.sample.en").write_text("en-7\tTwo.\nen-8 One.\n")
    with pytest.raises(InputError, match=r"de-en.sample.en:2: expected id<TAB>sentence"):
        load_bucc2018_task(tmp_path, "bucc2018/de-en/de-en.sample", "de", "en")


def test_bucc2018_threshold_from_sample_f1_on_training(shared_data, tmp_path):
    """XTREME's convention: the threshold maximising F1 on sample is applied to training."""
    from psp.mine import MineConfig
    from psp.mine.bucc import run_bucc
    from tests.test_mine import TrigramEmbedder

    root = _bucc2018(tmp_path / "data", shared_data)
    data = BuccData(
        dev_gold="bucc2018/de-en/de-en.sample",
        test_gold="bucc2018/de-en/de-en.training",
        src_lang="de",
    )
    results = run_bucc(TrigramEmbedder(dim=1024), root, tmp_path, cfg=MineConfig(), data=data)
    assert results["dev"]["gold"] == results["test"]["gold"] == 150
    assert results["dev"]["n_src"] == results["test"]["n_tgt"] == 750
    assert results["dev"]["threshold"] == results["test"]["threshold"]
    # surface trigrams find the pairs sharing names and numbers, far above chance (~0)
    assert results["test"]["f1"] > 0.2


def test_a_distractor_that_translates_a_gold_sentence_is_left_out(shared_data):
    """ru-en's newstest corpus holds the WMT19 Russian references of the newstest2019 English
    that NTREX-128 translated: in the source pool they would be correct translations counted as
    errors. The task leaves out every such line, and nothing else."""
    from psp.mine.bucc import BuccData, load_tasks

    data = BuccData(
        dev_gold="bitext/ru-en/tico19-test",
        test_gold="bitext/ru-en/ntrex128",
        src_lang="ru",
        tgt_lang="en",
        src_distractors=("bitext/ru-en/wmt-newstest.ru.gz",),
        tgt_distractors=("mono/en/wmt-newstest-en.txt.gz",),
        n_distractors=10**6,
    )
    tasks = load_tasks(shared_data, data)
    russian = read_lines(shared_data / "bitext/ru-en/wmt-newstest.ru.gz")
    english = read_lines(shared_data / "bitext/ru-en/wmt-newstest.en.gz")
    gold_en = {t.strip() for t in read_lines(shared_data / "bitext/ru-en/ntrex128.en.gz")}
    gold_en |= {t.strip() for t in read_lines(shared_data / "bitext/ru-en/tico19-test.en.gz")}
    translating = {ru.strip() for ru, en in zip(russian, english) if en.strip() in gold_en}
    assert len(translating) > 1500  # the whole of newstest2019's references, and then some
    pool = {s.strip() for split in tasks.values() for s in split[0]}
    gold_ru = {
        s.strip()
        for split in ("tico19-test", "ntrex128")
        for s in read_lines(shared_data / f"bitext/ru-en/{split}.ru.gz")
    }
    assert not (translating - gold_ru) & pool  # a reference equal to the gold one is the gold
    assert {ru.strip() for ru in russian} - translating - gold_ru - {""} <= pool


def test_bucc_refs_name_the_aligned_side_of_a_bitext_distractor():
    from psp.workflow.jobs import aligned_side, bucc_refs

    entry = {
        "dev": "d",
        "test": "t",
        "distractors": {"src": ["bitext/ar-en/un-v1.0-dev-test.ar"], "tgt": ["mono/en/x"]},
    }
    assert bucc_refs(entry)[-1] == "bitext/ar-en/un-v1.0-dev-test.en"
    assert aligned_side("mono/en/x") is None and aligned_side("bitext/ar-en/x.fr") is None
