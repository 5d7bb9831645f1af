"""SentencePiece training and PieceEncoder: the one tokenisation path of training and inference."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import random
import string
import unicodedata

import numpy as np
import pytest
import sentencepiece as spm

import psp.model.piece_encoder
from psp.data.corpora import iter_pair_lines
from psp.data.spm_training import REQUIRED_CHARS, spm_settings, train_spm, train_spm_from_pairs
from psp.io import InputError
from psp.model.piece_encoder import PieceEncoder
from psp.model.text import deleted_characters, model_text
from psp.workflow.jobs import heldout_corpora


def synthetic_sentences(n: int, seed: int = 0, letters: str = "abcdefghijklmnop") -> list[str]:
    """Mixed-case sentences over a small made-up vocabulary (fast to train on, nothing unknown)."""
    rng = random.Random(seed)
    words = ["".join(rng.choices(letters, k=rng.randint(2, 8))) for _ in range(300)]
    return [
        " ".join(
            w.capitalize() if rng.random() < 0.2 else w
            for w in rng.choices(words, k=rng.randint(3, 15))
        )
        + f" {i}."
        for i in range(n)
    ]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("spm") / "tiny.model"
    return train_spm(synthetic_sentences(2000), path, vocab_size=200)


def reference_encode(model, sentences, max_pieces=None):
    """One sentence at a time, in plain Python: what ``PieceEncoder.encode`` must reproduce."""
    sp = spm.SentencePieceProcessor(model_file=str(model))
    boundary = sp.piece_to_id("\u2581")
    out = []
    for sentence in sentences:
        text = "".join(c for c in sentence.lower() if unicodedata.category(c) != "Cf")
        ids = [i for i in sp.encode(text, out_type=int) if i != sp.unk_id()]
        ids = [] if all(i == boundary for i in ids) else ids
        ids = ids[:max_pieces] if max_pieces else ids
        out.append(ids or [sp.unk_id()])
    return out


def split(ids, offsets):
    assert ids.dtype == np.int32 and offsets.dtype == np.int64
    assert offsets[0] == 0 and offsets[-1] == len(ids)
    return [ids[a:b].tolist() for a, b in itertools.pairwise(offsets)]


TRICKY = [
    "",
    "   ",
    "日本語",  # only unknown characters: '▁' + <unk>, so [unk_id]
    "日本 語 ñ",
    "Hello 日本 World ñ",
    "soft\u00adhyphen zero\u200bwidth \ufeffbom",
    "ABC abc",
    "abcdefgh " * 40,
    "x",
]


def test_train_spm_ids_and_soft_vocab_limit(tiny_model, tmp_path):
    enc = PieceEncoder(tiny_model)
    assert enc.unk_id == 0 and enc.pieces()[0] == "<unk>"
    assert enc.vocab_size == 200
    assert not {"<s>", "</s>", "<pad>"} & set(enc.pieces())
    assert all(p == p.lower() for p in enc.pieces()[1:]), "trained on lowercased text"
    # a vocabulary the data cannot support shrinks instead of failing
    small = train_spm(synthetic_sentences(200), tmp_path / "small.model", vocab_size=5000)
    assert 50 < PieceEncoder(small).vocab_size < 5000


def test_train_spm_same_seed_same_model(tmp_path):
    sentences = synthetic_sentences(1500, seed=3)
    kwargs = dict(vocab_size=150, input_sentence_size=500, seed=7)
    a = train_spm(sentences, tmp_path / "a.model", **kwargs).read_bytes()
    b = train_spm(sentences, tmp_path / "b.model", **kwargs).read_bytes()
    assert a == b


def test_train_spm_failure_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        train_spm(iter([]), tmp_path / "empty.model", vocab_size=100)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("batch", [8192, 7])
def test_encode_matches_reference(tiny_model, monkeypatch, batch):
    monkeypatch.setattr(
        psp.model.piece_encoder, "_ENCODE_BATCH", batch
    )  # 7: results joined across SP calls
    sentences = synthetic_sentences(300, seed=1) + TRICKY
    for max_pieces in (None, 5):
        enc = PieceEncoder(tiny_model, max_pieces=max_pieces)
        ids, offsets = enc.encode(sentences, num_threads=1)
        assert len(offsets) == len(sentences) + 1
        assert split(ids, offsets) == reference_encode(tiny_model, sentences, max_pieces)


def test_encode_edge_cases(tiny_model):
    enc = PieceEncoder(tiny_model)
    ids, offsets = enc.encode([])
    assert ids.shape == (0,) and offsets.tolist() == [0]
    ids, offsets = enc.encode(["", "   "])
    assert split(ids, offsets) == [[enc.unk_id], [enc.unk_id]]
    with pytest.raises(TypeError):
        enc.encode("a single string")
    with pytest.raises(ValueError):
        PieceEncoder(tiny_model, max_pieces=0)


def test_encode_lowercase_threads_and_model_bytes(tiny_model):
    sentences = synthetic_sentences(500, seed=2)
    by_path = PieceEncoder(tiny_model)
    by_bytes = PieceEncoder(tiny_model.read_bytes())
    assert by_path.sha256 == by_bytes.sha256 == hashlib.sha256(tiny_model.read_bytes()).hexdigest()
    assert by_bytes.model_bytes == tiny_model.read_bytes()
    one = by_path.encode(sentences, num_threads=1)
    two = by_bytes.encode(sentences, num_threads=2)
    assert all(np.array_equal(x, y) for x, y in zip(one, two, strict=True))
    upper = [s.upper() for s in sentences]
    assert split(*by_path.encode(upper)) == split(*one)
    cased = PieceEncoder(tiny_model, lowercase=False)
    assert split(*cased.encode([s.lower() for s in upper])) == split(*one)
    assert split(*cased.encode(upper)) != split(*one)


def test_train_from_pairs_uses_both_sides(tmp_path):
    src = synthetic_sentences(800, seed=4, letters="abcdefgh")
    tgt = synthetic_sentences(800, seed=5, letters="stuvwxyz")
    pairs = tmp_path / "pairs.tsv.gz"
    with gzip.open(pairs, "wt") as handle:
        handle.writelines(f"{s}\t{t}\n" for s, t in zip(src, tgt, strict=True))
    model = train_spm_from_pairs(
        pairs, tmp_path / "pairs.model", vocab_size=150, character_coverage=1.0
    )
    enc = PieceEncoder(model)
    sp = spm.SentencePieceProcessor(model_file=str(model))
    for side in (src, tgt):
        pieces = sp.encode([s.lower() for s in side[:50]], out_type=int)
        assert all(enc.unk_id not in p for p in pieces), "both alphabets are covered"


@pytest.mark.parametrize("line", ["no tab here", "one\ttwo\tthree"])
def test_pair_lines_need_exactly_one_tab(tmp_path, line):
    path = tmp_path / "bad.tsv"
    path.write_text(f"a\tb\nc\td\n{line}\ne\tf\n")
    with pytest.raises(InputError, match=r"bad\.tsv:3: "):
        list(iter_pair_lines(path))
    with pytest.raises(InputError, match=r"bad\.tsv:3: "):
        train_spm_from_pairs(path, tmp_path / "bad.model", vocab_size=50)
    assert not (tmp_path / "bad.model").exists()


def test_encode_real_english(shared_data, tmp_path):
    """News English through a model trained on real es-en text: same ids as the reference loop."""
    with gzip.open(shared_data / "mono/en/wmt-newstest-en.txt.gz", "rt") as handle:
        english = [line.rstrip("\n") for line in itertools.islice(handle, 3000)]
    model = train_spm(english[:2000], tmp_path / "en.model", vocab_size=2000)
    held_out = english[2000:]
    enc = PieceEncoder(model, max_pieces=40)
    ids, offsets = enc.encode(held_out, num_threads=2)
    assert split(ids, offsets) == reference_encode(model, held_out, max_pieces=40)
    assert 10 < len(ids) / len(held_out) <= 40


def test_sentence_of_unknown_characters_maps_to_unk(tiny_model):
    """Only unknown characters leave '▁' + <unk>: the sentence is [unk_id], not the '▁' piece."""
    enc = PieceEncoder(tiny_model)
    sp = spm.SentencePieceProcessor(model_file=str(tiny_model))
    assert sp.encode("日本語 語") == [enc.boundary_id, enc.unk_id] * 2, "the case under test"
    ids, offsets = enc.encode(["日本語 語", "abc 日本", "日本 abc"])
    unknown, before, after = split(ids, offsets)
    assert unknown == [enc.unk_id]
    assert enc.unk_id not in before + after
    assert before == split(*enc.encode(["abc"]))[0] + [enc.boundary_id]


@pytest.fixture(scope="module")
def news_sample(shared_data):
    """2,000 Spanish and English news lines: rare digits and punctuation, as in real text."""
    lines = []
    for lang in ("es", "en"):
        path = shared_data / f"bitext/es-en/wmt-newstest.{lang}.gz"
        with gzip.open(path, "rt") as handle:
            lines += [line.rstrip("\n") for line in itertools.islice(handle, 1000)]
    return lines


def test_digits_and_punctuation_are_never_unknown(news_sample, tmp_path):
    settings = spm_settings({"vocab_size": 1000}, ["es", "en"])
    assert settings["character_coverage"] == 1.0 and settings["required_chars"] == REQUIRED_CHARS
    del settings["input_sentence_size"]
    model = train_spm(news_sample, tmp_path / "new.model", **settings)
    enc = PieceEncoder(model)
    sp = spm.SentencePieceProcessor(model_file=str(model))
    assert [c for c in REQUIRED_CHARS if enc.unk_id in sp.encode(c)] == []
    assert [c for c in REQUIRED_CHARS if sp.normalize(c) != "\u2581" + c] == [], "NFKC-stable"
    stats = enc.unknown_stats(news_sample)
    assert stats["unknown_digits"] == [] and stats["unknown_chars"] == 0
    # The sample does exercise the problem: the old settings lose digits and punctuation of it.
    old = train_spm(
        news_sample,
        tmp_path / "old.model",
        vocab_size=1000,
        character_coverage=0.995,
        required_chars="",
    )
    lost = {char for char, _ in PieceEncoder(old).unknown_stats(news_sample)["top_unknown"]}
    assert lost & set(string.digits) and lost & set(string.punctuation)


def test_spm_settings_by_language():
    assert spm_settings({}, ["zh", "en"])["character_coverage"] == 0.9995
    assert spm_settings({}, ["ar", "en"])["character_coverage"] == 1.0
    explicit = {"character_coverage": 0.98, "required_chars": "0", "byte_fallback": True}
    assert spm_settings(explicit, ["zh", "en"]) | explicit == spm_settings(explicit, ["zh", "en"])


def test_heldout_corpora_default_to_the_bucc_gold():
    config = {
        "models": {"de-en": {}, "es-en": {"spm": {"heldout": ["a", "b", "a"]}}, "en": {}},
        "bucc": {
            "de-en": {
                "model": "de-en",
                "dev": "bitext/de-en/ntrex128",
                "test": "bitext/de-en/ntrex128",
            },
            "es-en": {"model": "es-en", "dev": "x", "test": "y"},
        },
    }
    assert heldout_corpora("de-en", config) == ["bitext/de-en/ntrex128"]
    assert heldout_corpora("es-en", config) == ["a", "b"]
    assert heldout_corpora("en", config) == []


FORMAT_CHARS = "\u00ad\u200b\u200c\u200d\ufeff\u200e\u2060"


def sprinkle(sentences, seed=0):
    """Format characters inside words and between them, where editors and web pages leave them."""
    rng = random.Random(seed)
    out = []
    for sentence in sentences:
        chars = list(sentence)
        for _ in range(3):
            chars.insert(rng.randint(0, len(chars)), rng.choice(FORMAT_CHARS))
        out.append("".join(chars))
    return out


def test_format_characters_change_nothing(tmp_path):
    """Same model trained with and without format characters, and the same ids encoded."""
    sentences = synthetic_sentences(1500, seed=6)
    sprinkled = sprinkle(sentences)
    assert model_text(sprinkled) == [s.lower() for s in sentences]
    plain = train_spm(sentences, tmp_path / "plain.model", vocab_size=150)
    noisy = train_spm(sprinkled, tmp_path / "noisy.model", vocab_size=150)
    assert plain.read_bytes() == noisy.read_bytes()
    enc = PieceEncoder(plain)
    assert split(*enc.encode(sprinkled)) == split(*enc.encode(sentences))
    assert model_text(["ǅ\u00ad"], lowercase=False) == ["ǅ"]


def test_arabic_optional_marks_are_deleted():
    """Vocalised, stretched and plain spellings of a word are one text; other marks stay."""
    plain = "كتب الولد الدرس"
    vocalised = "كَتَبَ الوَلَدُ الدَّرْسَ"
    stretched = "كتـــب الولد الدرس"
    assert model_text([vocalised, stretched, plain]) == [plain] * 3
    # Marks of other scripts are letters of their words: the Spanish accent and the Hindi vowel
    # signs are kept, so is the Arabic hamza (a letter, not an optional mark).
    kept = ["canción", "हिन्दी", "سأل"]
    assert model_text(kept) == kept
    assert {0x0640, 0x064E, 0x0651, 0x0670} <= set(deleted_characters())
    # The combining hamza is kept: NFKC makes alef + hamza the letter U+0623.
    assert not {0x0623, 0x0653, 0x0654, 0x0655} & set(deleted_characters())


def test_unknown_stats_counts_what_encode_drops(tiny_model, tmp_path):
    enc = PieceEncoder(tiny_model)
    lines = ["abc 日本 def", "ABC", "日 b 本 日", "", "chip\u00adhop"]
    stats = enc.unknown_stats(lines, top=2)
    chars = sum(len(s.replace(" ", "")) for s in model_text(lines))
    assert stats == {
        "lines": 5,
        "chars": chars,
        "unknown_chars": 5,
        "unknown_char_share": 5 / chars,
        "lines_with_unknown": 2,
        "line_share": 2 / 5,
        "unknown_digits": [],
        "top_unknown": [["日", 3], ["本", 2]],
        "byte_fallback_chars": 0,
    }
    # A model that never saw digits and is not told to keep them loses them.
    sentences = [s.rsplit(" ", 1)[0] for s in synthetic_sentences(500)]  # without the numbers
    letters = train_spm(sentences, tmp_path / "letters.model", vocab_size=60, required_chars="")
    assert PieceEncoder(letters).unknown_stats(["a 4"])["unknown_digits"] == list(string.digits)
    # With byte fallback nothing is dropped: the unknown characters are spelled in bytes.
    bytes_model = train_spm(sentences, tmp_path / "bytes.model", vocab_size=400, byte_fallback=True)
    spelled = PieceEncoder(bytes_model).unknown_stats(lines)
    assert spelled["unknown_chars"] == 0 and spelled["unknown_digits"] == []
    assert spelled["byte_fallback_chars"] == 5
