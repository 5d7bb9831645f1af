"""The text a model sees: lowercased, with Unicode format characters and the Arabic optional
marks deleted and traditional Chinese characters folded into simplified ones, as Python strings
(:func:`model_text`) and, compiled, as UTF-8 bytes (:func:`model_utf8`, what the word cache
reads).

Training (:func:`psp.data.spm_training.train_spm`), encoding (:class:`psp.model.piece_encoder.PieceEncoder`)
and the exported tokenizers (``psp export``, through :func:`deleted_characters` and
:func:`folded_characters`) all take their text from here, so they cannot disagree.

``model_text`` is ``str.lower`` and ``str.translate`` per sentence plus a regex search for the
characters it deletes or folds: on news text 1.2 µs a sentence, as long as the word cache's whole lookup.
``model_utf8`` gives the same bytes at a third of that: every code point below :data:`LIMIT` has
its ``model_text`` as UTF-8 in one table, and one compiled loop decodes each sentence, maps each
character and writes the result. Two things make a character's result depend on more than
itself, and a sentence holding one is left to ``model_text``: the capital sigma (``str.lower``
makes it a final ``ς`` at the end of a word, which depends on its neighbours), and the code
points from :data:`LIMIT` on that ``model_text`` changes (the tag characters and the traditional
ideographs of the supplementary planes; every other one there is kept as it is, which
``tests/test_model_text.py`` checks over all of them).
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from importlib import resources

import numpy as np

from psp.model import _loops

__all__ = [
    "ARABIC_OPTIONAL_MARKS",
    "code_point_runs",
    "deleted_characters",
    "folded_characters",
    "model_text",
    "model_utf8",
]

# Arabic-script marks that writers add or leave out at will: the short vowels, tanwin, shadda and
# sukun (U+064B-U+0652, U+0656-U+065F), the dagger alef (U+0670), the Quranic annotation signs and
# the tatweel (U+0640, a stretch of the baseline). Tatoeba's Arabic is vocalised on 28 % of its
# lines, the UN text on 28 %, XNLI on 17 %, TICO-19 on 59 %, each word now with and now without
# them, so kept they split one word into several spellings and their pieces. The combining madda
# and hamza (U+0653-U+0655) stay: NFKC composes them into letters (alef + hamza is U+0623).
ARABIC_OPTIONAL_MARKS = (
    0x0640,
    *range(0x064B, 0x0653),
    *range(0x0656, 0x0660),
    0x0670,
    *range(0x06D6, 0x06DD),
    *range(0x06DF, 0x06E5),
    0x06E7,
    0x06E8,
    *range(0x06EA, 0x06EE),
)


#: The code point ranges that hold every format character (category Cf): planes 0 and 1 and the
#: tag block (``tests/test_model_text.py`` checks all code points against them).
FORMAT_CHARACTER_BLOCKS = ((0, 0x20000), (0xE0000, 0xE1000))


@functools.cache
def _deleted_char_table() -> dict[int, None]:
    """Every Unicode format character (category Cf) and the Arabic optional marks, as deletions.

    Built on first use, not at import, from the blocks that hold format characters
    (:data:`FORMAT_CHARACTER_BLOCKS`, 20 ms; all code points would take 0.2 s).
    """
    blocks = itertools.chain.from_iterable(range(a, b) for a, b in FORMAT_CHARACTER_BLOCKS)
    format_chars = (cp for cp in blocks if unicodedata.category(chr(cp)) == "Cf")
    return dict.fromkeys(sorted({*format_chars, *ARABIC_OPTIONAL_MARKS}))


@functools.cache
def folded_characters() -> dict[int, int]:
    """Each traditional Chinese character's simplified one (``traditional_chinese.tsv``, 4,353
    characters from OpenCC's table): what another tokenizer built from a model must fold too.

    The training corpora are simplified Chinese (UN, WMT news, XNLI: none of these characters
    occurs in their 41,568 lines), so without the fold every traditional character of a user's
    text (Taiwan, Hong Kong, much of Tatoeba) is a piece the model never saw, mostly unknown.
    Folded one character at a time, a traditional sentence gets the pieces of its simplified
    spelling; the few characters that are also simplified words of their own (``乾`` in
    ``乾隆``, ``著`` in ``著名``) are merged with their simplified counterpart, a small loss of
    distinctions for a model that sees whole sentences.
    """
    table = resources.files("psp.model").joinpath("traditional_chinese.tsv").read_text("utf-8")
    rows = (line.split("\t") for line in table.splitlines() if not line.startswith("#"))
    return {int(a, 16): int(b, 16) for a, b in rows}


@functools.cache
def _translate_table() -> dict[int, int | None]:
    """``str.translate`` table of everything :func:`model_text` changes after lowercasing."""
    return {**folded_characters(), **_deleted_char_table()}


@functools.cache
def _translated_char_pattern() -> re.Pattern:
    """Whether a line holds a character :func:`model_text` deletes or folds (a C scan, no copy)."""
    return re.compile(_code_point_class(sorted(_translate_table())))


def code_point_runs(code_points: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted ``code_points`` as ``(first, last)`` runs of consecutive ones: how a regex
    character class of them is written, here and in ``psp export``'s normaliser."""
    runs: list[list[int]] = []
    for cp in code_points:
        if runs and cp == runs[-1][1] + 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return [(a, b) for a, b in runs]


def _code_point_class(code_points: Iterable[int]) -> str:
    """A Python regex character class of ``code_points`` (sorted)."""
    parts = (
        f"\\U{a:08x}" + (f"-\\U{b:08x}" if b > a else "") for a, b in code_point_runs(code_points)
    )
    return "[" + "".join(parts) + "]"


def deleted_characters() -> list[int]:
    """The code points :func:`model_text` deletes, in order: what another tokenizer built from a
    model (``psp export``) must delete too."""
    return list(_deleted_char_table())


def model_text(sentences: Sequence[str], lowercase: bool = True) -> list[str]:
    """Lowercase, delete Unicode format characters (category Cf) and the Arabic optional marks,
    fold traditional Chinese characters into simplified ones (:func:`folded_characters`): the
    text a model sees.

    Format characters steer rendering, not words: a soft hyphen (U+00AD) or zero-width space
    (U+200B) inside a word would otherwise split it into other pieces and an unknown one, and
    SentencePiece's NFKC turns some of them (U+200B, U+200C, U+FEFF, U+200E) into word breaks.
    Zero-width (non-)joiners are deleted too: in Arabic-script text they choose glyph shapes or
    mark a visual break inside one word, and writers use them inconsistently, so deleting them
    gives the spellings with and without them the same pieces. The Arabic short vowels and
    tatweel (:data:`ARABIC_OPTIONAL_MARKS`) are deleted for the same reason. Training
    (:func:`psp.data.spm_training.train_spm`) and encoding (:meth:`PieceEncoder.encode`) both
    call this, so they cannot disagree.

    It sits on the hot path of embedding, so it spares lines without such a character the slow
    ``str.translate``: an ASCII line has none (``isascii`` reads a flag), and a regex search
    finds the others.
    """
    texts = [s.lower() for s in sentences] if lowercase else list(sentences)
    needs = _translated_char_pattern().search
    table = _translate_table()
    return [t if t.isascii() or not needs(t) else t.translate(table) for t in texts]


#: Code points below this have their ``model_text`` in :func:`char_table`: every cased letter,
#: every character ``model_text`` deletes but the tags, and the traditional ideographs of the
#: basic plane (the table takes 20 ms to build).
LIMIT = FORMAT_CHARACTER_BLOCKS[0][1]
#: Characters whose lowercase depends on their neighbours (the capital sigma).
_CONTEXTUAL = (0x03A3,)


@functools.cache
def char_table(lowercase: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
    """Each code point's ``model_text`` below :data:`LIMIT`: ``starts`` (``LIMIT + 1``) into
    ``chars`` (UTF-8 bytes), whether it needs its neighbours (``contextual``), the most bytes a
    byte of input can become, and the code points from :data:`LIMIT` on that ``model_text``
    changes (sorted: a sentence holding one is left to it)."""
    table = _translate_table()
    # Most code points stay as they are: only those that lowercasing changes (found on the whole
    # range at once, one code point per code point since U+0130, the one whose lowercase is two,
    # is set aside first), those the table changes and the surrogates are mapped one at a time
    # (a loop over every code point took 60 ms a process).
    code_points = np.arange(LIMIT, dtype=np.uint32)
    every = code_points.tobytes().decode("utf-32-le", "surrogatepass")
    lowered = every.replace("\u0130", "\0").lower() if lowercase else every
    lower_changes = np.flatnonzero(
        code_points != np.frombuffer(lowered.encode("utf-32-le", "surrogatepass"), np.uint32)
    )
    mapped = dict.fromkeys(range(0xD800, 0xE000), "")  # no UTF-8 spelling
    for cp in sorted({*lower_changes.tolist(), *(cp for cp in table if cp < LIMIT)}):
        mapped[cp] = (chr(cp).lower() if lowercase else chr(cp)).translate(table)
    mapped = dict(sorted(mapped.items()))
    pieces, previous = [], 0
    for cp, text in mapped.items():
        pieces += [every[previous:cp], text]
        previous = cp + 1
    pieces.append(every[previous:])
    lengths = np.select(
        [code_points < 0x80, code_points < 0x800, code_points < 0x10000], [1, 2, 3], 4
    )
    lengths[list(mapped)] = [len(text.encode("utf-8")) for text in mapped.values()]
    starts = np.zeros(LIMIT + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    chars = np.frombuffer("".join(pieces).encode("utf-8"), dtype=np.uint8)
    contextual = np.zeros(LIMIT, dtype=np.bool_)
    if lowercase:
        contextual[list(_CONTEXTUAL)] = True
    # A character of n bytes becomes at most growth * n (U+0130, two bytes, lowercases to three;
    # a folded ideograph of three bytes may become four).
    growth = 2
    changed_above = np.array(sorted(cp for cp in table if cp >= LIMIT), dtype=np.int64)
    return starts, chars, contextual, growth, changed_above


def model_utf8(
    sentences: Sequence[str], lowercase: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The UTF-8 bytes of ``model_text(sentences, lowercase)``, back to back.

    Returns:
        ``(buf, starts, unmapped)``: text ``k`` is ``buf[starts[k]:starts[k + 1]]``, which is
        ``model_text`` of sentence ``k`` unless ``unmapped[k]`` (a capital sigma, a tag
        character, a traditional ideograph of the supplementary planes): for those the caller
        takes ``model_text`` itself.

    Raises:
        UnicodeEncodeError: a sentence holds a lone surrogate (no UTF-8 spelling).
    """
    encoded = [s.encode("utf-8") for s in sentences]
    buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    text_starts = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=text_starts[1:])
    starts, chars, contextual, growth, changed_above = char_table(lowercase)
    return _loops.map_texts(
        buf, text_starts, starts, chars, contextual, growth, changed_above, lowercase
    )
