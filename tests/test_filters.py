"""Tests for psp.data.filters: each filter on hand-written cases, the stats contract, workers,
atomicity."""

from __future__ import annotations

import gzip
import itertools
import json
import random

import numpy as np
import pytest

from psp.data.corpora import RawPair
from psp.data.filters import REASONS, FilterConfig, clean_text, filter_pairs, filter_sentences
from psp.data.filters.dedup import SeenHashes
from psp.data.filters.language import LangidCheck, LanguageIdentifier, load_identifier
from psp.data.filters.text import ngram_overlap, prepare_sentence, tokens
from psp.io import InputError


def pairs_of(*rows) -> list[RawPair]:
    """RawPairs from (src, tgt) or (src, tgt, score) tuples."""
    return [
        RawPair(row[0], row[1], row[2] if len(row) > 2 else None, f"test:{i}")
        for i, row in enumerate(rows, start=1)
    ]


def read_gz(path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def run_pairs(tmp_path, pairs, cfg, **kwargs):
    out, stats_path = tmp_path / "pairs.tsv.gz", tmp_path / "filter_stats.json"
    stats = filter_pairs(pairs, cfg, out, stats_path=stats_path, **kwargs)
    assert json.loads(stats_path.read_text()) == stats
    assert stats["kept"] + sum(stats["removed"].values()) == stats["lines_in"]
    assert list(stats["removed"]) == list(REASONS)
    return stats, read_gz(out)


# A config with every filter off, so each test switches on the one it checks.
NOTHING = dict(
    dedup=False,
    langid=False,
    min_tokens=0,
    max_tokens=10_000,
    max_trigram_overlap=None,
    min_score=None,
)


# ---------------------------------------------------------------- text


def test_clean_text_nfc_whitespace_bom_and_case_kept():
    decomposed = "Cafe\u0301"
    assert clean_text(decomposed) == "Caf\u00e9"
    assert clean_text("\ufeff  a\u00a0\u00a0b\t c\u2028d \n") == "a b c d"
    assert clean_text("The CAT") == "The CAT"
    assert clean_text(" \t\u3000") == ""


def test_prepare_sentence_reasons():
    assert prepare_sentence(None, True)[0] == "invalid_utf8"
    assert prepare_sentence("  \t ", True)[0] == "empty"
    assert prepare_sentence("one\ttwo", True)[0] == "tab_in_sentence"
    assert prepare_sentence(" The  Cat ", True) == (None, "The Cat", "the cat")
    assert prepare_sentence(" The  Cat ", False) == (None, "The Cat", "The Cat")


def test_tokens_split_punctuation():
    assert tokens("Hello, world! It's 2024.") == [
        "Hello",
        ",",
        "world",
        "!",
        "It",
        "'",
        "s",
        "2024",
        ".",
    ]


def test_trigram_overlap_hand_computed():
    # trigrams: {the cat sat, cat sat on, sat on the, on the mat} vs
    #           {the cat sat, cat sat on, sat on a, on a mat}: 2 shared of 4
    assert ngram_overlap("the cat sat on the mat".split(), "the cat sat on a mat".split()) == 0.5
    # shorter "a b c" has 1 trigram, found in the other: 1/1
    assert ngram_overlap("a b c d".split(), "a b c".split()) == 1.0
    assert ngram_overlap("a b c d".split(), "e f g h".split()) == 0.0
    # repeats count per position in the shorter (tie: the first): abc,bca,cab,abc vs abc,bcd,cde,def
    assert ngram_overlap("a b c a b c".split(), "a b c d e f".split()) == 0.5
    # fewer than 3 tokens: the order drops to the shorter sentence's length
    assert ngram_overlap(["thank", "you"], ["thank", "you", "so", "much"]) == 1.0
    assert ngram_overlap(["thank", "you"], ["thanks", "a", "lot"]) == 0.0
    assert ngram_overlap(["hi"], ["hi", "there"]) == 1.0
    assert ngram_overlap([], ["x"]) == 0.0


# ---------------------------------------------------------------- config


def test_presets():
    bitext = FilterConfig.bitext("es")
    assert (bitext.languages, bitext.length_side, bitext.min_tokens, bitext.max_tokens) == (
        ("es", "en"),
        "tgt",
        3,
        100,
    )
    assert bitext.lowercase and bitext.max_trigram_overlap is None and bitext.min_score is None
    para = FilterConfig.paraphrase(langid=False)
    assert (para.length_side, para.min_tokens, para.max_tokens) == ("mean", 5, 40)
    assert (para.max_trigram_overlap, para.min_score, para.langid) == (0.7, 0.4, False)
    mono = FilterConfig.monolingual("es")
    assert mono.languages == ("es",) and not mono.lowercase


def test_from_dict_round_trip_and_unknown_key():
    cfg = FilterConfig.bitext("de", langid_candidates=("de", "en", "fr"))
    assert FilterConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="max_token'"):
        FilterConfig.from_dict({"languages": ["es", "en"], "max_token": 5})
    with pytest.raises(ValueError, match="languages"):
        FilterConfig.from_dict({"min_tokens": 5})


@pytest.mark.parametrize(
    "bad",
    [
        dict(length_side="left"),
        dict(min_tokens=10, max_tokens=5),
        dict(langid_threshold=1.5),
        dict(langid_candidates=("fr", "en")),
        dict(score_model="some/model", min_score=None),
        dict(languages=("es", "en", "fr")),
    ],
)
def test_config_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        FilterConfig(**{"languages": ("es", "en"), **bad})


# ---------------------------------------------------------------- dedup


def test_seen_hashes_matches_a_python_set():
    rng = random.Random(0)
    seen, reference = SeenHashes(), set()
    for batch_size in [1, 5, 0, 40, 3, 200, 7, 64, 500, 2]:
        batch = [str(rng.randrange(400)) for _ in range(batch_size)]
        got = seen.add(batch)
        expected = []
        for key in batch:
            expected.append(key not in reference)
            reference.add(key)
        assert got.tolist() == expected
    assert len(seen) == len(reference)
    assert len(seen._runs) <= int(np.log2(len(reference))) + 1


# ---------------------------------------------------------------- langid


@pytest.fixture(scope="module")
def identifier() -> LanguageIdentifier:
    return load_identifier(None)


CLEAR = {
    "es": "El gobierno anunció ayer nuevas medidas para reducir el desempleo juvenil.",
    "en": "The government announced new measures yesterday to reduce youth unemployment.",
    "de": "Die Regierung hat gestern neue Maßnahmen gegen die Jugendarbeitslosigkeit angekündigt.",
}


def test_langid_clear_sentences(identifier):
    for lang, sentence in CLEAR.items():
        predicted, prob = identifier.classify(sentence)
        assert predicted == lang and prob > 0.99


def py3langid_reference(candidates=None):
    """py3langid's own per-sentence classifier over the same model."""
    from py3langid.langid import MODEL_FILE
    from py3langid.langid import LanguageIdentifier as Py3Langid

    reference = Py3Langid.from_pickled_model(MODEL_FILE, norm_probs=True)
    if candidates is not None:
        reference.set_languages(list(candidates))
    return reference


AWKWARD = ["Consejos.", "hvg.hu asked Balázs Zságer.", "Jiří Krejčí", "", "a", "☃" * 700]
# Cyrillic text where the alphabet rule changes py3langid's answer (Russian labelled Bulgarian,
# Ukrainian labelled Russian), and one it cannot decide (letters of Russian and Ukrainian only).
CYRILLIC = [
    "Эта публикация привлекла к себе огромное внимание.",
    "Будинок не ідеальний, але нормальний.",
    "Мы їх бачили",
]


@pytest.mark.parametrize("candidates", [None, ("es", "en", "ca", "pt")])
def test_langid_agrees_with_py3langid(candidates):
    """The batched walk gives py3langid's answers (it sums in float32, hence the tolerance):
    with the alphabet rule on text it does not touch, without the rule on any text."""
    reference = py3langid_reference(candidates)
    texts = [*CLEAR.values(), *AWKWARD, CLEAR["de"] * 40]
    for identifier, batch in [
        (LanguageIdentifier(candidates), texts),
        (LanguageIdentifier(candidates, alphabet_rule=False), [*texts, *CYRILLIC]),
    ]:
        top, prob = identifier.identify(batch)
        for text, index, p in zip(batch, top, prob, strict=True):
            ref_lang, ref_prob = reference.classify(text)
            assert identifier.languages[index] == ref_lang, text
            assert p == pytest.approx(float(ref_prob), abs=1e-4)


def test_langid_alphabet_rule():
    """A Cyrillic language whose alphabet lacks a letter of the text is never the answer; a
    text no candidate's alphabet covers keeps the model's answer."""
    plain = LanguageIdentifier(alphabet_rule=False)
    ruled = LanguageIdentifier()
    assert [plain.classify(text)[0] for text in CYRILLIC[:2]] == ["bg", "ru"]
    assert [ruled.classify(text)[0] for text in CYRILLIC[:2]] == ["ru", "uk"]
    # "ы" is in neither alphabet of Ukrainian and Bulgarian, "і" not in Russian's
    assert ruled.classify("Мы" + CYRILLIC[1])[0] not in ("ru", "uk", "bg")
    both = LanguageIdentifier(("ru", "uk"))
    assert both.classify(CYRILLIC[2]) == LanguageIdentifier(("ru", "uk"), False).classify(
        CYRILLIC[2]
    )
    top, prob = both.identify(["", "Мы", "Їх"])
    assert [both.languages[i] for i in top[1:]] == ["ru", "uk"] and np.isfinite(prob).all()


def test_langid_batch_equals_one_at_a_time(identifier):
    """Sorting and grouping by length inside a batch must not change any answer."""
    rng = random.Random(2)
    words = " ".join(CLEAR.values()).split() + ["☃", "Ünïcode", "日本語", "42"]
    texts = [" ".join(rng.choices(words, k=rng.randrange(0, 200))) for _ in range(120)]
    top, prob = identifier.identify(texts)
    for text, index, p in zip(texts, top, prob, strict=True):
        lang, single = identifier.classify(text)
        assert (identifier.languages[index], p) == (lang, single)


# The share of each bitext side labelled with the side's language, on up to 20,000 lines spread
# evenly over all of its files: ar 98.7 %, de 99.7, es 97.5, fr 99.1, ru 97.3, tr 98.3, zh 99.7,
# en 98.8. Without the alphabet rule Russian scores 96.8 %: 3 % of it is labelled Bulgarian,
# Ukrainian, Macedonian or Serbian, most of it lines that the rule rules out (with "ы", "э" or
# "ё", letters none of those alphabets has).
SIDE_ACCURACY_FLOOR = 0.97
SIDE_LANGUAGES = ("ar", "de", "es", "fr", "ru", "tr", "zh", "en")


def bitext_side(root, lang: str, n: int) -> list[str]:
    """``n`` lines spread evenly over every bitext side in ``lang``, normalised, empty dropped."""
    lines: list[str] = []
    for path in sorted(root.glob(f"bitext/*-en/*.{lang}.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            lines.extend(handle)
    step = max(1, len(lines) // n)
    return [text for text in map(clean_text, lines[::step][:n]) if text]


@pytest.mark.parametrize("lang", SIDE_LANGUAGES)
def test_langid_accuracy_on_bitext_sides(shared_data, identifier, lang):
    texts = bitext_side(shared_data, lang, 20_000)
    assert len(texts) > 10_000
    top, _ = identifier.identify(texts)
    accuracy = float(np.mean(top == identifier.languages.index(lang)))
    assert accuracy >= SIDE_ACCURACY_FLOOR, f"{lang}: {accuracy:.4f}"


def tatoeba_side(root, code: str) -> list[str]:
    path = root / "tatoeba" / f"tatoeba.{code}-eng.{code}"
    with open(path, encoding="utf-8") as handle:
        return [text for text in map(clean_text, handle) if text]


def test_langid_alphabet_rule_keeps_russian_drops_its_neighbours(shared_data):
    """The Russian filter's job on Tatoeba (held out): keep Russian sentences, drop those of
    the Cyrillic neighbours. The rule does better on Russian, Ukrainian, Belarusian and Kazakh
    and at most half a point worse on the others (measured: Russian kept 82.4 % -> 86.1 %;
    passed as Russian: Ukrainian 10.4 % -> 7.7, Belarusian 5.3 -> 2.6, Kazakh 2.3 -> 0.7,
    Bulgarian 11.7 -> 12.0: three sentences with a letter Bulgarian does not write)."""
    check = {rule: LangidCheck(["ru"], 0.5, None) for rule in (False, True)}
    check[False].identifier = LanguageIdentifier(alphabet_rule=False)
    kept = {}
    for code in ("rus", "ukr", "bul", "bel", "mkd", "srp", "kaz", "mon"):
        records = [(text,) for text in tatoeba_side(shared_data, code)]
        kept[code] = {rule: float(np.mean(check[rule](records))) for rule in check}
    assert kept["rus"][True] >= kept["rus"][False] + 0.02, kept
    for code in ("ukr", "bel", "kaz"):
        assert kept[code][True] < kept[code][False], (code, kept)
    for code in ("bul", "mkd", "srp", "mon"):
        assert kept[code][True] <= kept[code][False] + 0.005, (code, kept)


def test_langid_unknown_code_is_an_error():
    with pytest.raises(ValueError, match="xx"):
        filter_sentences(
            ["a b c"],
            "xx",
            None,
            out_path="/nonexistent/out.txt.gz",
            stats_path="/nonexistent/s.json",
        )


# ---------------------------------------------------------------- filter_pairs, one filter each


def test_invalid_empty_tab_counted_first_reason_wins(tmp_path):
    pairs = pairs_of(
        (None, "fine sentence here"),
        ("fine sentence here", "   "),
        ("a\tb", "fine sentence here"),
        ("\t", None),  # empty and invalid: invalid_utf8 comes first
        ("tab\there", ""),  # tab and empty: empty comes first
        ("kept one", "kept two"),
    )
    stats, lines = run_pairs(tmp_path, pairs, FilterConfig(languages=("es", "en"), **NOTHING))
    assert stats["removed"]["invalid_utf8"] == 2
    assert stats["removed"]["empty"] == 2
    assert stats["removed"]["tab_in_sentence"] == 1
    assert lines == ["kept one\tkept two"]


def test_length_bounds_by_side(tmp_path):
    words = lambda n: " ".join(["w"] * n)  # noqa: E731
    pairs = pairs_of(
        ("x", words(2)),  # tgt too short
        ("x", words(3)),  # kept: bounds are inclusive
        ("x", words(100)),  # kept
        ("x", words(101)),  # tgt too long
        (words(500), "a b c ."),  # kept: only the English side is bounded
    )
    cfg = FilterConfig.bitext("es", **{**NOTHING, "min_tokens": 3, "max_tokens": 100})
    stats, lines = run_pairs(tmp_path, pairs, cfg)
    assert stats["removed"]["length"] == 2 and stats["kept"] == 3

    # mean of the two sides: (4 + 7) / 2 = 5.5 in [5, 40]; (2 + 7) / 2 = 4.5 is not
    mean = FilterConfig.paraphrase(**{**NOTHING, "min_tokens": 5, "max_tokens": 40})
    stats, lines = run_pairs(tmp_path, pairs_of((words(4), words(7)), (words(2), words(7))), mean)
    assert stats["removed"]["length"] == 1 and lines == [f"{words(4)}\t{words(7)}"]

    both = FilterConfig(languages=("en", "en"), **{**NOTHING, "min_tokens": 3}, length_side="both")
    stats, _ = run_pairs(tmp_path, pairs_of((words(2), words(9)), (words(3), words(3))), both)
    assert stats["removed"]["length"] == 1


def test_dedup_keeps_first_copy_after_normalisation_and_lowercasing(tmp_path):
    pairs = pairs_of(
        ("Hola  Mundo", "Hello World"),
        ("hola mundo", "hello world "),
        ("HOLA MUNDO", "HELLO\u00a0WORLD"),
        ("hola mundo", "hello there"),  # a different pair: kept
    )
    cfg = FilterConfig(languages=("es", "en"), **{**NOTHING, "dedup": True})
    stats, lines = run_pairs(tmp_path, pairs, cfg)
    assert stats["removed"]["duplicate"] == 2
    assert lines == ["hola mundo\thello world", "hola mundo\thello there"]

    no_dedup = FilterConfig(languages=("es", "en"), **NOTHING)
    stats, lines = run_pairs(tmp_path, pairs, no_dedup)
    assert stats["kept"] == 4


def test_trigram_filter(tmp_path):
    pairs = pairs_of(
        ("The cat sat on the mat", "the cat sat on a mat"),  # 0.5: kept at 0.7
        ("He went home early today .", "He went home early today !"),  # 4/5 = 0.8: removed
        ("thank you", "Thank you"),  # 1.0 by bigrams: removed
    )
    cfg = FilterConfig(languages=("en", "en"), **{**NOTHING, "max_trigram_overlap": 0.7})
    stats, lines = run_pairs(tmp_path, pairs, cfg)
    assert stats["removed"]["trigram"] == 2
    assert lines == ["the cat sat on the mat\tthe cat sat on a mat"]


def test_score_threshold_uses_corpus_score(tmp_path):
    pairs = pairs_of(("a b", "c d", 0.39), ("e f", "g h", 0.4), ("i j", "k l", 0.9), ("m", "n"))
    cfg = FilterConfig(languages=("en", "en"), **{**NOTHING, "min_score": 0.4})
    stats, lines = run_pairs(tmp_path, pairs, cfg)
    assert stats["removed"]["score"] == 1
    assert lines == ["e f\tg h", "i j\tk l", "m\tn"]


def test_langid_removes_wrong_language_side(tmp_path):
    pairs = pairs_of(
        (CLEAR["es"], CLEAR["en"]),
        (CLEAR["de"], CLEAR["en"]),  # source is German, not Spanish
        (CLEAR["es"], CLEAR["es"]),  # target is Spanish
    )
    cfg = FilterConfig.bitext("es", dedup=False)
    stats, lines = run_pairs(tmp_path, pairs, cfg)
    assert stats["removed"]["langid"] == 2
    assert lines == [f"{CLEAR['es'].lower()}\t{CLEAR['en'].lower()}"]

    # Portuguese and Catalan sources: caught with all 97 candidates, passed as Spanish when
    # langid.py may only answer "es" or "en" (why the wide set is the default)
    neighbours = pairs_of(
        ("O governo anunciou ontem novas medidas para reduzir o desemprego juvenil.", CLEAR["en"]),
        ("El govern va anunciar ahir noves mesures per reduir l'atur juvenil.", CLEAR["en"]),
    )
    stats, _ = run_pairs(tmp_path, neighbours, cfg)
    assert stats["removed"]["langid"] == 2
    restricted = FilterConfig.bitext("es", langid_candidates=("es", "en"))
    stats, _ = run_pairs(tmp_path, neighbours, restricted)
    assert stats["kept"] == 2


def test_stats_layout(tmp_path):
    cfg = FilterConfig.bitext("es", langid=False)
    stats, _ = run_pairs(tmp_path, pairs_of(("uno dos tres", "one two three")), cfg)
    assert set(stats) == {"lines_in", "kept", "removed", "config", "languages"}
    assert stats["languages"] == ["es", "en"]
    assert FilterConfig.from_dict(stats["config"]) == cfg


# ---------------------------------------------------------------- workers and atomicity


def varied_pairs(n: int) -> list[RawPair]:
    """Pairs that exercise every filter: languages, duplicates, lengths, bad lines."""
    rng = random.Random(1)
    templates = [
        (CLEAR["es"], CLEAR["en"]),
        (CLEAR["de"], CLEAR["en"]),
        ("Consejos.", "A few tips."),
        (
            "Es un día muy bonito para pasear por el parque.",
            "It is a lovely day for a walk in the park.",
        ),
        (None, "broken"),
        ("", "empty source"),
        ("Sí", "Yes"),
    ]
    rows = []
    for i in range(n):
        src, tgt = rng.choice(templates)
        if rng.random() < 0.6 and src:
            src, tgt = f"{src} {i}", f"{tgt} {i}"
        rows.append((src, tgt))
    return pairs_of(*rows)


def test_workers_give_identical_output(tmp_path):
    pairs = varied_pairs(300)
    cfg = FilterConfig.bitext("es")
    one, lines_one = run_pairs(tmp_path / "one", pairs, cfg, workers=1, chunk_size=17)
    two, lines_two = run_pairs(tmp_path / "two", pairs, cfg, workers=2, chunk_size=17)
    assert one == two and lines_one == lines_two
    assert one["removed"]["langid"] > 0 and one["removed"]["duplicate"] > 0


def test_input_error_mid_stream_leaves_no_output(tmp_path):
    def broken():
        yield from varied_pairs(50)
        raise InputError("a.es.gz has 50 lines but a.en.gz has 51")

    out, stats_path = tmp_path / "pairs.tsv.gz", tmp_path / "filter_stats.json"
    with pytest.raises(InputError, match="51"):
        filter_pairs(
            broken(),
            FilterConfig.bitext("es", langid=False),
            out,
            stats_path=stats_path,
            chunk_size=8,
        )
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- filter_sentences


def test_filter_sentences_keeps_case_and_shares_the_checks(tmp_path):
    lines = [
        ("El  gobierno anunció ayer nuevas medidas.", "f:1"),
        ("el gobierno anunció ayer nuevas medidas.", "f:2"),  # differs in case: kept
        ("El gobierno anunció ayer nuevas medidas.", "f:3"),  # duplicate of line 1
        (None, "f:4"),
        ("dos palabras", "f:5"),
        (CLEAR["en"], "f:6"),
    ]
    out, stats_path = tmp_path / "es.txt.gz", tmp_path / "stats.json"
    stats = filter_sentences(lines, "es", None, out_path=out, stats_path=stats_path)
    assert read_gz(out) == [
        "El gobierno anunció ayer nuevas medidas.",
        "el gobierno anunció ayer nuevas medidas.",
    ]
    assert stats["removed"] == {
        **dict.fromkeys(REASONS, 0),
        "invalid_utf8": 1,
        "duplicate": 1,
        "length": 1,
        "langid": 1,
    }
    assert stats["languages"] == ["es"]

    # plain strings, lowercased on request
    cfg = FilterConfig.monolingual("es", lowercase=True, langid=False)
    filter_sentences([text for text, _ in lines], "es", cfg, out_path=out, stats_path=stats_path)
    assert read_gz(out) == ["el gobierno anunció ayer nuevas medidas.", CLEAR["en"].lower()]


# ---------------------------------------------------------------- real data


def test_real_bitext_es_en(shared_data, tmp_path):
    base = shared_data / "bitext" / "es-en" / "wmt-newstest"
    with gzip.open(f"{base}.es.gz", "rt") as es, gzip.open(f"{base}.en.gz", "rt") as en:
        rows = [
            RawPair(s.rstrip("\n"), t.rstrip("\n"), None, f"{base}:{i}")
            for i, (s, t) in enumerate(itertools.islice(zip(es, en), 2000), start=1)
        ]
    stats, lines = run_pairs(tmp_path, rows, FilterConfig.bitext("es"))
    assert stats["lines_in"] == 2000
    assert stats["kept"] > 0.8 * 2000
    assert 0 < stats["removed"]["langid"] < 0.1 * 2000
    assert all(line.count("\t") == 1 and line == line.lower() for line in lines)


def test_score_model_scores_pairs_without_a_score(tmp_path):
    """Pairs without a corpus score get the model's cosine; pairs with one keep theirs."""
    import psp
    from psp.data.spm_training import train_spm
    from psp.model.torch_model import PSPModel

    text = [CLEAR["en"], CLEAR["es"], "the quick brown fox jumps over the lazy dog"] * 30
    spm_path = train_spm(text, tmp_path / "tiny.model", vocab_size=60)
    model_dir = tmp_path / "model"
    PSPModel.from_spm(spm_path, dim=32, seed=0).save(model_dir)

    rows = [
        ("the quick brown fox", "the quick brown fox"),  # cosine 1
        ("the lazy dog", "El gobierno anunció ayer"),
        ("brown fox jumps", "jumps over the dog"),
        ("the quick brown fox", "El gobierno anunció ayer", 0.95),  # corpus score wins
        ("the quick brown fox", "the quick brown fox", 0.1),
    ]
    cfg = FilterConfig(languages=("en", "en"), **{**NOTHING, "min_score": 0.4})
    cfg = FilterConfig.from_dict({**cfg.to_dict(), "score_model": str(model_dir)})
    stats, lines = run_pairs(tmp_path, pairs_of(*rows), cfg, chunk_size=2)

    cosines = psp.load(model_dir).score([r[0] for r in rows[:3]], [r[1] for r in rows[:3]])
    assert cosines[0] == pytest.approx(1.0, abs=1e-5)
    expected_kept = [r for r, c in zip(rows[:3], cosines, strict=True) if c >= 0.4] + [rows[3]]
    assert lines == [f"{r[0].lower()}\t{r[1].lower()}" for r in expected_kept]
    assert stats["removed"]["score"] == 5 - len(expected_kept) >= 2
