"""SentencePiece training for the data stage: one unigram model per model, on the text both of
its languages, with the settings that keep every meaningful character.

Models are unigram, trained on the :func:`~psp.model.text.model_text` text of both
sides of a bitext (the text :class:`~psp.model.piece_encoder.PieceEncoder` encodes), with id 0
reserved for ``<unk>`` and no padding, BOS or EOS pieces: every other id is a real piece with its
own embedding row. An unknown character is dropped, so a model must know every character that
carries meaning: :func:`spm_settings` gives alphabetic scripts full character coverage and makes
ASCII digits and common punctuation required pieces whatever their frequency, so that
"4 de junio" and "6 de junio" never embed alike.
"""

from __future__ import annotations

import io
import logging
import os
import string
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import sentencepiece as spm

from psp.data.corpora import iter_pair_lines
from psp.io import atomic_path, iter_batches
from psp.model.text import model_text

__all__ = ["REQUIRED_CHARS", "spm_settings", "train_spm", "train_spm_from_pairs"]

log = logging.getLogger(__name__)

UNK_ID = 0
# Sentences normalised per call while the trainer reads them.
_TEXT_BATCH = 8192

# Characters every model keeps as pieces, however rare in its training text: a dropped digit
# makes "4 de junio" and "6 de junio" one sentence, a dropped "?" or "'" loses a question or a
# contraction. ASCII digits and punctuation, and the typographic quotes, dashes and signs that
# news text uses instead of them (all unchanged by SentencePiece's NFKC normalisation).
REQUIRED_CHARS = string.digits + string.punctuation + "‘’‚“”„«»‹›–—¿¡€£¥°§·•"
# Scripts whose alphabet is too large for full character coverage: a piece for every rare
# ideograph of the training text would crowd out the frequent words.
LARGE_ALPHABET_LANGUAGES = frozenset({"zh", "ja", "ko"})
SPM_DEFAULTS = {
    "vocab_size": 8000,
    "character_coverage": None,
    "input_sentence_size": 2_000_000,
    "byte_fallback": False,
    "required_chars": None,
}


def spm_settings(config: Mapping, languages: Sequence[str]) -> dict:
    """The training settings of a model's ``spm:`` config, with its null defaults resolved.

    ``character_coverage`` null is 1.0 (every character of the training text becomes a piece)
    unless a language has a large alphabet (zh, ja, ko: 0.9995); ``required_chars`` null is
    :data:`REQUIRED_CHARS`. Training and the tokeniser statistics both read the settings here,
    so the statistics report what the model was trained with.

    ``byte_fallback`` stays off by default: it adds 256 byte pieces and spells a character the
    model lacks as 1-4 of them, and in a bag of pieces those are shared by every character of
    the same Unicode block, so two sentences of unrelated rare characters would look alike
    (and a sentence of nothing else would no longer embed as zero). Digits are not split
    either (no ``split_digits``): a bag would make "2014" and "2041" the same sentence.
    """
    settings = {key: config.get(key, default) for key, default in SPM_DEFAULTS.items()}
    if settings["character_coverage"] is None:
        large = LARGE_ALPHABET_LANGUAGES.intersection(languages)
        settings["character_coverage"] = 0.9995 if large else 1.0
    if settings["required_chars"] is None:
        settings["required_chars"] = REQUIRED_CHARS
    return settings


def train_spm(
    sentences: Iterable[str],
    out_model: str | os.PathLike,
    *,
    vocab_size: int,
    character_coverage: float = 1.0,
    input_sentence_size: int = 1_000_000,
    seed: int = 0,
    num_threads: int = 1,
    byte_fallback: bool = False,
    required_chars: str = "",
) -> Path:
    """Train a unigram SentencePiece model on the :func:`model_text` of ``sentences``; write it atomically.

    Pass the text of both languages of a bitext: the model (and so the embedding table) is shared.
    ``input_sentence_size`` caps how many sentences the trainer keeps (a uniform reservoir sample
    of the stream, so memory stays bounded on a big corpus). ``vocab_size`` is a soft limit
    (``hard_vocab_limit=False``): a corpus too small for it yields a smaller vocabulary instead of
    an error; the size actually reached is logged and available as ``PieceEncoder.vocab_size``.
    ``required_chars`` become pieces even if the text lacks them: the workflow passes
    :data:`REQUIRED_CHARS` (:func:`spm_settings`); the default, none, lets a toy vocabulary
    smaller than that set train. ``byte_fallback`` spells characters outside the vocabulary as
    UTF-8 byte pieces instead of ``<unk>`` (see :func:`spm_settings` for why it is off).

    Ids: 0 is ``<unk>``; there is no pad, BOS or EOS id.

    Example:
        >>> train_spm(["Hola mundo", "Hello world"] * 50, "tiny.model", vocab_size=30)  # doctest: +SKIP
    """
    out_model = Path(out_model)
    model_bytes = _trained_model(
        sentences,
        seed=seed,
        vocab_size=vocab_size,
        character_coverage=character_coverage,
        byte_fallback=byte_fallback,
        required_chars=required_chars,
        input_sentence_size=input_sentence_size,
        num_threads=num_threads,
    )
    actual = spm.SentencePieceProcessor(model_proto=model_bytes).get_piece_size()
    with atomic_path(out_model) as tmp:
        tmp.write_bytes(model_bytes)
    log.info("wrote %s: vocabulary %d pieces (requested %d)", out_model, actual, vocab_size)
    return out_model


def _trained_model(
    sentences: Iterable[str],
    *,
    seed: int,
    vocab_size: int,
    character_coverage: float,
    byte_fallback: bool,
    required_chars: str,
    input_sentence_size: int,
    num_threads: int,
) -> bytes:
    """The bytes of a unigram model trained on the :func:`model_text` of ``sentences`` (the settings
    of :func:`train_spm`). SentencePiece turns an exception inside the sentence iterator into a
    bare RuntimeError; the original (an InputError naming file:line) is raised instead."""
    spm.set_random_generator_seed(seed)
    buffer = io.BytesIO()
    raised: list[BaseException] = []

    def normalised() -> Iterator[str]:
        try:
            for batch in iter_batches(sentences, _TEXT_BATCH):
                yield from model_text(batch)
        except BaseException as err:
            raised.append(err)
            raise

    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=normalised(),
            model_writer=buffer,
            model_type="unigram",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            byte_fallback=byte_fallback,
            required_chars=required_chars,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            hard_vocab_limit=False,
            unk_id=UNK_ID,
            pad_id=-1,
            bos_id=-1,
            eos_id=-1,
            num_threads=num_threads,
            minloglevel=1,
        )
    except RuntimeError:
        if raised:
            raise raised[0] from None
        raise
    return buffer.getvalue()


def train_spm_from_pairs(
    pairs_tsv_gz: str | os.PathLike, out_model: str | os.PathLike, vocab_size: int, **kwargs
) -> Path:
    """Train on both sides of a ``src<TAB>tgt`` pairs file; ``kwargs`` go to :func:`train_spm`."""

    def both_sides() -> Iterator[str]:
        for _, src, tgt in iter_pair_lines(pairs_tsv_gz):
            yield src
            yield tgt

    return train_spm(both_sides(), out_model, vocab_size=vocab_size, **kwargs)
