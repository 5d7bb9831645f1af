"""Per-sentence text handling shared by the pair and the sentence filters.

One path decides what happens to a single sentence (:func:`prepare_sentence`); the pair filter
runs it on each side, the monolingual filter on the one side, so both agree on every detail.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

# Words (letters, digits, underscore runs) and single punctuation marks: close to what the Moses
# and NLTK tokenizers used by the original preprocessing count, without their language rules.
_TOKEN = re.compile(r"\w+|[^\w\s]")


def clean_text(text: str) -> str:
    r"""Unicode NFC, byte-order marks dropped, every whitespace run collapsed to one space, stripped.

    Why NFC and not NFKC: NFC only composes combining sequences, so an "é" typed as one code point
    or as "e" + accent becomes the same string (and dedups as one). NFKC would also fold
    compatibility characters (full-width forms, ligatures, superscripts), which changes the text
    the data was written in; SentencePiece applies its own NFKC-based normalisation when it
    encodes, so nothing is lost by keeping the corpus in NFC. Lowercasing is a separate step.

    Whitespace is what :meth:`str.split` calls whitespace: tabs, non-breaking and ideographic
    spaces, line and paragraph separators, so a collapsed sentence never breaks a TSV line.

    Example:
        >>> clean_text("  Cafe\u0301\u00a0 con\tleche ")
        'Café con leche'
    """
    text = unicodedata.normalize("NFC", text).replace("\ufeff", "")
    return " ".join(text.split())


def tokens(text: str) -> list[str]:
    """Words and punctuation marks of ``text``: the unit of the length and trigram filters.

    Scripts written without spaces (Chinese, Japanese) give one token per run of characters,
    so bound lengths on the English side (``length_side="tgt"``) for those languages.
    """
    return _TOKEN.findall(text)


def prepare_sentence(text: str | None, lowercase: bool) -> tuple[str | None, str, str]:
    """Check and normalise one sentence: ``(reason, normalized, output)``.

    ``reason`` is ``None`` for a usable sentence, else the first of ``"invalid_utf8"`` (the
    reader gave ``None``), ``"empty"`` (nothing left after normalising) or ``"tab_in_sentence"``
    (a tab inside the raw text: the outputs are tab-separated, and a tab in a sentence usually
    means a mis-split line, so it is dropped rather than silently turned into a space).
    ``normalized`` keeps the case (language identification needs it); ``output`` is what gets
    written and deduplicated (lowercased when asked).
    """
    if text is None:
        return "invalid_utf8", "", ""
    normalized = clean_text(text)
    if not normalized:
        return "empty", "", ""
    if "\t" in text:
        return "tab_in_sentence", normalized, ""
    return None, normalized, normalized.lower() if lowercase else normalized


def dedup_key(text: str) -> str:
    """``text`` as near-duplicates share it: :func:`clean_text`, lowercased, every digit ``0``,
    punctuation, symbols and control or format characters dropped, spaces collapsed.

    The normalisation CCNet applies before deduplicating (``cc_net/text_normalizer.py``, as the
    NLLB and LASER mining pipelines reuse it), so "The 2 cats!" and "the 3 cats" share a key:
    pairs that differ only there teach a translation model nothing more.

    Example:
        >>> dedup_key("  The 2 cats — «really»!")
        'the 0 cats really'
    """
    kept = []
    for char in clean_text(text).lower():
        category = unicodedata.category(char)
        if category == "Nd":
            kept.append("0")
        elif char == " " or category[0] not in "PSC":
            kept.append(char)
    return " ".join("".join(kept).split())


def ngram_overlap(a: Sequence[str], b: Sequence[str], n: int = 3) -> float:
    """Share of the shorter sentence's word n-grams that also occur in the other sentence.

    Counts follow the ParaNMT preprocessing: each n-gram position of the sentence with fewer
    n-grams counts once (repeats included), the other sentence is a set; on a tie ``a`` is the
    shorter one. A sentence with fewer than ``n`` tokens has no trigrams; the original code scored
    such pairs 0 (always kept). Here the order drops to the shorter sentence's length instead, so
    "thank you" / "thank you" still scores 1.0 as the near-copy it is. Empty input gives 0.0.

    Example:
        >>> ngram_overlap("the cat sat on the mat".split(), "the cat sat on a mat".split())
        0.5
    """
    n = min(n, len(a), len(b))
    if n == 0:
        return 0.0
    grams_a = [tuple(a[i : i + n]) for i in range(len(a) - n + 1)]
    grams_b = [tuple(b[i : i + n]) for i in range(len(b) - n + 1)]
    shorter, longer = (grams_a, grams_b) if len(grams_a) <= len(grams_b) else (grams_b, grams_a)
    other = set(longer)
    return sum(gram in other for gram in shorter) / len(shorter)
