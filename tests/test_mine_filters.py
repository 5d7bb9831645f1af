"""The pair filters (psp.mine.pair_filters) on small real examples, one filter at a time, and
what ``psp mine`` counts of them in its stats."""

from __future__ import annotations

import dataclasses
import gzip
import json
import statistics

import numpy as np
import pytest
import yaml

from psp.data.filters.text import clean_text, dedup_key
from psp.io import InputError
from psp.mine.config import PairFilterConfig
from psp.mine.pair_filters import (
    _UNSPACED,
    KEPT,
    LENGTH_FACTORS,
    REASONS,
    UNSPACED_FACTOR,
    check_languages_known,
    filter_reasons,
    removed_counts,
)

from .conftest import REPO

NONE = PairFilterConfig.none()


def reasons_of(pairs: list[tuple[float, str, str]], cfg, languages=("es", "en")) -> list:
    """The reason each ``(score, src, tgt)`` is removed for, ``None`` where it is kept."""
    scores = np.array([score for score, _, _ in pairs], dtype=np.float32)
    codes = filter_reasons(
        scores, [s for _, s, _ in pairs], [t for _, _, t in pairs], cfg, languages
    )
    return [None if code == KEPT else REASONS[code] for code in codes]


def test_dedup_key_folds_case_punctuation_and_digits():
    assert dedup_key("“Faltan 5 semanas…”") == dedup_key('"faltan 6 semanas"') == "faltan 0 semanas"
    assert dedup_key("Город праздновал 40-летие.") == "город праздновал 00летие"
    assert dedup_key("北京，2020年。") == "北京0000年"


def test_dedup_keeps_the_best_scoring_copy_exact_and_normalised():
    pairs = [
        (1.20, "Murió más tarde en el hospital.", "He died later in hospital."),
        (1.35, "Murió más tarde en el hospital.", "He died later in hospital."),
        (1.30, "«Murió más tarde en el hospital»", "He died later in hospital!"),
        (1.25, "Murió en el hospital.", "He died in hospital."),
    ]
    cfg = dataclasses.replace(NONE, dedup=True)
    assert reasons_of(pairs, cfg) == ["duplicate", None, "near_duplicate", None]
    # digits count as one digit: two scores of one match are one pair
    scores = [
        (1.3, "Ayr 38 - Melrose 17", "Ayr 38 - 17 Melrose"),
        (1.2, "Ayr 21 - Melrose 10", "Ayr 21 - 10 Melrose"),
    ]
    assert reasons_of(scores, cfg) == [None, "near_duplicate"]


def test_same_text_and_copies_but_not_translations_full_of_names():
    pairs = [
        (2.07, "Il faut bien le faire.", "Il faut bien le faire."),
        (
            1.67,
            "Elite League: Dundee Stars 5-3 Belfast Giants",
            "Elite League: Dundee Stars 5-3 Belfast Giants!",
        ),
        (1.50, "The cat sleeps in the big house.", "The cat sleeps in the house."),
        (
            1.88,
            "Chris Leslie es Miembro del Parlamento por Nottingham East",
            "Chris Leslie is MP for Nottingham East",
        ),
        (1.40, "El gato duerme en la casa.", "The cat sleeps in the house."),
    ]
    cfg = dataclasses.replace(NONE, max_overlap=0.8)
    assert reasons_of(pairs, cfg) == ["same_text", "same_text", "copy", None, None]
    assert reasons_of(pairs, NONE) == [None] * 5


def test_length_ratio_scales_each_language():
    """A Chinese sentence has about a third of its English translation's characters
    (LENGTH_FACTORS): raw characters would call the pair implausible."""
    zh = "一架满载乘客的飞机安全起飞后,他死了。"
    en = "He died after making sure that a plane carrying hundreds of people got off the ground safely."
    assert len(en) / len(zh) > 4
    cfg = dataclasses.replace(NONE, max_length_ratio=2.0)
    assert reasons_of([(1.3, zh, en)], cfg, ("zh", "en")) == [None]
    assert reasons_of([(1.3, "Bonjour.", en)], cfg, ("fr", "en")) == ["length_ratio"]
    # Digits and Latin names in a Chinese sentence are as long as in English
    zh_names = "WHO在2020年3月11日宣布COVID-19为大流行病。"
    en_names = "The WHO declared COVID-19 a pandemic on 11 March 2020."
    assert reasons_of([(1.3, zh_names, en_names)], cfg, ("zh", "en")) == [None]
    short = [
        (1.3, "Hola.", "He died later in hospital after the attack on Sunday night, police said.")
    ]
    assert reasons_of(short, cfg) == ["length_ratio"]


def test_scores_above_the_maximum_are_removed():
    pairs = [(1.9, "El gato duerme.", "The cat sleeps."), (1.3, "Hola.", "Hello.")]
    assert reasons_of(pairs, dataclasses.replace(NONE, max_score=1.5)) == ["score_too_high", None]


def test_language_check_finds_untranslated_copies_not_close_relatives():
    """A side in the pair's other language goes; a Russian gold sentence that langid.py calls
    Bulgarian (a close relative, which the data stage's rule would remove) stays."""
    pairs = [
        (1.4, "The volcano has been active since 1994.", "The volcano has been active since 1994!"),
        (1.3, "El volcán está activo desde 1994.", "El volcán está activo desde 1994."),
        (1.2, "El volcán está activo desde 1994.", "The volcano has been active since 1994."),
    ]
    cfg = dataclasses.replace(NONE, pair_langid=True)
    assert reasons_of(pairs, cfg) == ["src_language", "tgt_language", None]
    ru = [
        (
            1.3,
            "Город праздновал свое 40-летие, когда произошли землетрясение и цунами.",
            "The city was celebrating its 40th anniversary when the earthquake and tsunami hit.",
        )
    ]
    assert reasons_of(ru, cfg, ("ru", "en")) == [None]
    assert reasons_of(pairs, cfg, None) == [None] * 3  # no languages: not checked
    with pytest.raises(InputError, match=r"\['xx'\].*pair_langid: false"):
        check_languages_known(["es", "xx"])


def test_each_pair_counted_under_the_first_filter_that_removes_it():
    pairs = [(1.9, "Oh, no.", "Oh, no."), (1.9, "Oh, no.", "Oh, no."), (1.2, "Sí.", "Yes.")]
    codes = filter_reasons(
        np.array([p[0] for p in pairs]),
        [p[1] for p in pairs],
        [p[2] for p in pairs],
        PairFilterConfig(),
        ("es", "en"),
    )
    counts = removed_counts(codes)
    assert list(counts) == list(REASONS) and counts["same_text"] == 2 and sum(counts.values()) == 2


def test_length_factors_are_the_mirror_training_bitext_medians(shared_data):
    """LENGTH_FACTORS: median len(English) / len(other side), characters after clean_text, over
    the training corpora of each bitext model of config.yaml; for Chinese, UNSPACED_FACTOR."""
    models = yaml.safe_load((REPO / "config.yaml").read_text())["models"]
    for entry in models.values():
        if entry["type"] != "bitext":
            continue
        lang, ratios = entry["languages"][0], []
        for corpus in entry["corpora"]:
            with (
                gzip.open(shared_data / f"{corpus}.{lang}.gz", "rt") as other,
                gzip.open(shared_data / f"{corpus}.en.gz", "rt") as english,
            ):
                for a, b in zip(other, english, strict=True):
                    a, b = clean_text(a), clean_text(b)
                    if lang == "zh":  # English characters per Han character, the rest as English
                        han = len(_UNSPACED.findall(a))
                        if han and b:
                            ratios.append((len(b) - (len(a) - han)) / han)
                    elif a and b:
                        ratios.append(len(b) / len(a))
        factor = UNSPACED_FACTOR if lang == "zh" else LENGTH_FACTORS[lang]
        assert factor == pytest.approx(statistics.median(ratios), abs=0.006), lang


def test_psp_mine_counts_what_the_filters_removed(tiny_model, news, tmp_path):
    from psp.cli import main

    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("".join(f"{line}\n" for line in news[:40] * 2), encoding="utf-8")
    tgt.write_text("".join(f"{line}\n" for line in news[:40]), encoding="utf-8")
    out = tmp_path / "mined.tsv.gz"
    argv = ["mine", "--model", tiny_model, "--src-file", src, "--tgt-file", tgt, "--output", out]
    assert main([str(arg) for arg in [*argv, "--threshold=-1e9", "--margin", "absolute"]]) == 0
    stats = json.loads((tmp_path / "mined.stats.json").read_text())
    rows = gzip.open(out, "rt").read().splitlines()
    assert stats["filters"] == PairFilterConfig().to_dict() and list(stats["removed"]) == list(
        REASONS
    )
    assert stats["above_threshold"] == stats["kept"] + sum(stats["removed"].values())
    assert stats["kept"] == len(rows) and stats["removed"]["same_text"] > 0  # English both sides
    assert all(row.split("\t")[1] != row.split("\t")[2] for row in rows)
