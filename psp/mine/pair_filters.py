"""What is removed from mined pairs before they are written, as MT training data wants it.

Mining keeps every candidate whose margin score clears the threshold; the NLLB (stopes) and
LASER pipelines clean such bitext before training on it. The filters of
:class:`~psp.mine.config.PairFilterConfig` run over the scored pairs, best score first, in the
order of :data:`REASONS`; a pair is counted once, under the first filter that removes it:

1. ``same_text``: both sides are the same text after :func:`~psp.data.filters.text.dedup_key`
   (an untranslated copy, or numbers and punctuation alone);
2. ``copy``: more than ``max_overlap`` of the shorter side's words (tokens holding a letter,
   normalised as for dedup) occur in the other side: a copy with a few words changed;
3. ``length_ratio``: the sides' lengths in characters, each times its language's factor in
   :data:`LENGTH_FACTORS` (as stopes' ``LengthFilter`` scales them) and each Han character or
   kana times :data:`UNSPACED_FACTOR`, differ by more than ``max_length_ratio``;
4. ``score_too_high``: a score above ``max_score``;
5. ``duplicate``: a better-scoring pair kept has the same two texts;
6. ``near_duplicate``: one has the same two :func:`~psp.data.filters.text.dedup_key` keys;
7. ``src_language``, ``tgt_language``: langid.py (the data stage's model, all its languages:
   :func:`~psp.data.filters.language.load_identifier`) finds the side in the pair's other language,
   an untranslated copy. Not the data stage's rule (the side's own language with probability
   0.5): on the mining tasks' gold pairs langid.py names a close relative for short headlines
   and names (Bulgarian or Macedonian for Russian, Galician or Catalan for Spanish), so that
   rule removed 1 to 3 % of the gold pairs (docs/mining.md, Pair filters).

The per-pair checks come first, so a duplicate is compared only with pairs that passed them and
the best-scoring copy that did is the one kept; language identification, the slow check, comes
last and sees only what is left. All the checks commute with the threshold: filtering the
pairs above it gives what filtering every candidate and then cutting gives.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import numpy as np

from psp.data.filters.dedup import hash64
from psp.data.filters.text import clean_text, dedup_key, ngram_overlap
from psp.io import InputError
from psp.mine.config import PairFilterConfig

log = logging.getLogger(__name__)

REASONS = (
    "same_text",
    "copy",
    "length_ratio",
    "score_too_high",
    "duplicate",
    "near_duplicate",
    "src_language",
    "tgt_language",
)
KEPT = -1

#: Characters of English per character of each language: the median, over the sentence pairs
#: of the mirror's training bitext of each model in config.yaml (its held-out sets left out),
#: of len(English) / len(other side) after ``clean_text``; tests/test_mine_filters.py measures
#: them again. A language not listed counts 1.0, as English does.
LENGTH_FACTORS = {
    "en": 1.0,
    "ar": 1.18,
    "de": 0.88,
    "es": 0.91,
    "fr": 0.88,
    "ru": 0.97,
    "tr": 1.02,
}

#: Han characters and kana: scripts written without spaces, where a character counts as a word.
_UNSPACED = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])")
#: Characters of English per Han character or kana: the median, over the zh-en model's training
#: bitext, of (len(English) - the Chinese side's other characters) / its Han characters. The
#: digits, Latin names and punctuation of a Chinese sentence count as English characters do: one
#: factor for the whole side (3.53) called 2.3 % of the zh-en dev task's gold pairs implausible,
#: this count 0.05 % (tests/test_mine_filters.py measures the factor again).
UNSPACED_FACTOR = 3.95


def _words(key: str) -> list[str]:
    """The words of a dedup key that hold a letter (numbers are shared by translations), each
    Han character or kana one word: a Chinese side's run of characters is not one word that
    its Latin names outnumber."""
    words = _UNSPACED.sub(r" \1 ", key).split()
    return [word for word in words if any(char.isalpha() for char in word)]


def _length(text: str, lang: str | None) -> float:
    """A side's length in English characters (at least 1)."""
    text = clean_text(text)
    unspaced = len(_UNSPACED.findall(text))
    other = (len(text) - unspaced) * LENGTH_FACTORS.get(lang or "", 1.0)
    return max(1.0, other + unspaced * UNSPACED_FACTOR)


def filter_reasons(
    scores: np.ndarray,
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    cfg: PairFilterConfig,
    languages: tuple[str, str] | None = None,
) -> np.ndarray:
    """For each pair (row ``i``: ``src_texts[i]``, ``tgt_texts[i]``, ``scores[i]``), the index
    in :data:`REASONS` of the filter that removes it, or :data:`KEPT`.

    ``languages`` (source, target) drives the language check and the length factors; without
    it the language check is skipped (logged) and characters other than Han and kana count 1.
    """
    n = len(scores)
    if not len(src_texts) == len(tgt_texts) == n:
        raise ValueError(f"{n} scores for {len(src_texts)} and {len(tgt_texts)} texts")
    reasons = np.full(n, KEPT, dtype=np.int8)
    order = np.argsort(-np.asarray(scores), kind="stable")  # best first: dedup keeps it
    keys = (
        [(dedup_key(src_texts[i]), dedup_key(tgt_texts[i])) for i in range(n)]
        if cfg.dedup or cfg.max_overlap is not None
        else None
    )

    def remove(rows, reason: str) -> None:
        reasons[rows] = REASONS.index(reason)

    def alive() -> np.ndarray:
        return order[reasons[order] == KEPT]

    if cfg.max_overlap is not None:
        for i in alive().tolist():
            src_key, tgt_key = keys[i]
            if src_key == tgt_key:
                remove(i, "same_text")
            elif ngram_overlap(_words(src_key), _words(tgt_key), 1) > cfg.max_overlap:
                remove(i, "copy")
    if cfg.max_length_ratio is not None:
        src_lang, tgt_lang = languages or (None, None)
        for i in alive().tolist():
            a, b = _length(src_texts[i], src_lang), _length(tgt_texts[i], tgt_lang)
            if max(a, b) / min(a, b) > cfg.max_length_ratio:
                remove(i, "length_ratio")
    if cfg.max_score is not None:
        rows = alive()
        remove(rows[np.asarray(scores)[rows] > cfg.max_score], "score_too_high")
    if cfg.dedup:
        _remove_later_copies(
            alive(),
            [f"{src_texts[i]}\t{tgt_texts[i]}" for i in range(n)],
            lambda rows: remove(rows, "duplicate"),
        )
        _remove_later_copies(
            alive(), ["\t".join(key) for key in keys], lambda rows: remove(rows, "near_duplicate")
        )
    if cfg.pair_langid:
        if languages is None or languages[0] == languages[1]:
            log.warning("no pair of languages: the mined pairs' languages are not checked")
        else:
            _check_languages(alive(), (src_texts, tgt_texts), languages, remove)
    return reasons


def _remove_later_copies(rows: np.ndarray, keys: Sequence[str], remove) -> None:
    """``remove`` every row of ``rows`` (best first) whose key an earlier row has."""
    if len(rows) == 0:
        return
    hashes = hash64([keys[i] for i in rows.tolist()])
    first = np.zeros(len(rows), dtype=bool)
    first[np.unique(hashes, return_index=True)[1]] = True
    remove(rows[~first])


def _check_languages(rows, sides, languages, remove) -> None:
    """``remove`` the rows whose source, then target, side is in the other side's language."""
    from psp.data.filters.language import load_identifier

    identifier = load_identifier(None)
    for texts, other, reason in zip(
        sides, languages[::-1], ("src_language", "tgt_language"), strict=True
    ):
        top, _ = identifier.identify([texts[i] for i in rows.tolist()])
        copied = np.asarray(identifier.languages)[top] == other
        remove(rows[copied], reason)
        rows = rows[~copied]


def removed_counts(reasons: np.ndarray) -> dict[str, int]:
    """``{reason: pairs removed}`` for every reason of :data:`REASONS`, in their order."""
    counts = np.bincount(reasons[reasons != KEPT], minlength=len(REASONS))
    return {reason: int(count) for reason, count in zip(REASONS, counts, strict=True)}


def check_languages_known(languages: Sequence[str]) -> None:
    """Refuse, before any work, a pair language the language check cannot identify."""
    from psp.data.filters.language import check_codes

    try:
        check_codes(languages)
    except ValueError as err:
        raise InputError(
            f"{err}: the mined pairs' languages cannot be checked; turn the check off "
            "(pair_langid: false, psp mine --no-pair-langid)"
        ) from None
