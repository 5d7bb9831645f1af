"""The compiled :func:`model_utf8` gives the bytes of :func:`model_text`: every code point alone
and between letters, every mirror text of every language, and the assumptions its table rests
on, checked over all code points."""

from __future__ import annotations

import sys
import unicodedata

import numpy as np
import pytest

from psp.model.text import (
    FORMAT_CHARACTER_BLOCKS,
    LIMIT,
    char_table,
    deleted_characters,
    folded_characters,
    model_text,
    model_utf8,
)
from tests.test_word_pieces import PAIRS, files_of, text_columns

ALL = [cp for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp < 0xE000]


def assert_same_as_model_text(sentences: list[str], lowercase: bool = True) -> None:
    buf, starts, unmapped = model_utf8(sentences, lowercase)
    expected = model_text(sentences, lowercase)
    for k, text in enumerate(expected):
        if unmapped[k]:
            continue
        got = buf[starts[k] : starts[k + 1]].tobytes().decode("utf-8")
        assert got == text, f"model_utf8 differs from model_text on {sentences[k]!r}"


@pytest.mark.parametrize("lowercase", [True, False])
def test_every_code_point_alone_and_between_letters(lowercase):
    chars = [chr(cp) for cp in ALL]
    assert_same_as_model_text(chars, lowercase)
    assert_same_as_model_text([f"A{c}b {c}" for c in chars], lowercase)


def test_only_the_contextual_tag_and_supplementary_folded_characters_are_left_to_model_text():
    sentences = ["ΟΔΟΣ ΣΑ", "a\U000e0041b", "plain Σ", "no sigma σ", "\U0002005e x", "國"]
    _, _, unmapped = model_utf8(sentences)
    assert unmapped.tolist() == [True, True, True, False, True, False]
    assert not model_utf8(["ΟΔΟΣ"], lowercase=False)[2].any()


def test_the_table_covers_what_model_text_may_change():
    """Every format character lies in FORMAT_CHARACTER_BLOCKS, and from LIMIT on model_text
    changes exactly the code points the compiled path leaves to it: what lets the table stop at
    LIMIT."""
    in_blocks = {cp for a, b in FORMAT_CHARACTER_BLOCKS for cp in range(a, b)}
    format_chars = {cp for cp in ALL if unicodedata.category(chr(cp)) == "Cf"}
    assert format_chars <= in_blocks
    assert format_chars <= set(deleted_characters())
    above = [chr(cp) for cp in ALL if cp >= LIMIT]
    changed = [ord(c) for c, t in zip(above, model_text(above), strict=True) if t != c]
    assert changed == char_table(True)[4].tolist()


def test_traditional_chinese_is_folded_into_simplified_once():
    """Folding is idempotent (no chain left in the table) and maps ideographs to ideographs."""
    folded = folded_characters()
    assert len(folded) > 4000
    assert not set(folded.values()) & set(folded)
    assert all(unicodedata.name(chr(cp), "").startswith("CJK") for cp in folded.values())
    assert model_text(["這個問題很難。", "我們說漢語"]) == ["这个问题很难。", "我们说汉语"]


@pytest.mark.parametrize("language", [*PAIRS, "en"])
def test_every_mirror_text(language, shared_data):
    lines = [t for f in files_of(shared_data, language) for t in text_columns(f)]
    assert_same_as_model_text(lines)


def test_a_lone_surrogate_is_refused_as_utf8_is():
    with pytest.raises(UnicodeEncodeError):
        model_utf8(["a\udc80b"])
    assert np.array_equal(model_utf8([])[1], [0])
