"""SentencePiece training and the one tokenisation path shared by HDF5 writing and inference.

P-SP represents a sentence as the mean of its SentencePiece piece embeddings, so the exact id
sequence a sentence maps to must be the same when the training HDF5 is written and when a trained
model embeds text. :class:`PieceEncoder` is that single path: lowercase, encode, drop unknown
pieces, map an empty result to ``[unk_id]``, truncate. It returns flat ids plus offsets (the
``nn.EmbeddingBag`` layout) and does its post-processing in vectorised numpy because it sits on the
hot path of embedding.

Models are unigram, trained on the lowercased text of both sides of a bitext, with id 0 reserved
for ``<unk>`` and no padding, BOS or EOS pieces: every other id is a real piece with its own
embedding row.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import sentencepiece as spm

from psp.io import InputError, atomic_path, iter_lines

__all__ = ["PieceEncoder", "iter_pair_lines", "train_spm", "train_spm_from_pairs"]

log = logging.getLogger(__name__)

UNK_ID = 0
# Sentences per SentencePiece call: its Python-list result costs ~36 bytes per id, so bounding
# the batch bounds that transient memory whatever the caller passes.
_ENCODE_BATCH = 8192


def iter_pair_lines(path: str | os.PathLike) -> Iterator[tuple[int, str, str]]:
    """Yield ``(line_number, src, tgt)`` from a ``src<TAB>tgt`` file (plain or ``.gz``).

    A line without exactly one tab is an :class:`InputError` naming ``file:line``, because a
    silently skipped or mis-split line would misalign every pair after it.
    """
    for lineno, line in iter_lines(path):
        parts = line.split("\t")
        if len(parts) != 2:
            raise InputError(
                f"{path}:{lineno}: expected 'src<TAB>tgt' (exactly one tab), found {len(parts) - 1}"
            )
        yield lineno, parts[0], parts[1]


def train_spm(
    sentences: Iterable[str],
    out_model: str | os.PathLike,
    vocab_size: int,
    character_coverage: float = 0.995,
    input_sentence_size: int = 1_000_000,
    seed: int = 0,
    num_threads: int = 1,
) -> Path:
    """Train a unigram SentencePiece model on lowercased ``sentences`` and write it atomically.

    Pass the text of both languages of a bitext: the model (and so the embedding table) is shared.
    ``input_sentence_size`` caps how many sentences the trainer keeps (a uniform reservoir sample
    of the stream, so memory stays bounded on a big corpus). ``vocab_size`` is a soft limit
    (``hard_vocab_limit=False``): a corpus too small for it yields a smaller vocabulary instead of
    an error; the size actually reached is logged and available as ``PieceEncoder.vocab_size``.

    Ids: 0 is ``<unk>``; there is no pad, BOS or EOS id.

    Example:
        >>> train_spm(["Hola mundo", "Hello world"] * 50, "tiny.model", vocab_size=30)  # doctest: +SKIP
    """
    out_model = Path(out_model)
    spm.set_random_generator_seed(seed)
    buffer = io.BytesIO()
    raised: list[BaseException] = []

    def lowercased() -> Iterator[str]:
        # SentencePiece turns an exception inside the iterator into a bare RuntimeError;
        # keep the original (an InputError naming file:line) to re-raise it.
        try:
            for sentence in sentences:
                yield sentence.lower()
        except BaseException as err:
            raised.append(err)
            raise

    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=lowercased(),
            model_writer=buffer,
            model_type="unigram",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
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
    model_bytes = buffer.getvalue()
    actual = spm.SentencePieceProcessor(model_proto=model_bytes).get_piece_size()
    with atomic_path(out_model) as tmp:
        tmp.write_bytes(model_bytes)
    log.info("wrote %s: vocabulary %d pieces (requested %d)", out_model, actual, vocab_size)
    return out_model


def train_spm_from_pairs(
    pairs_tsv_gz: str | os.PathLike, out_model: str | os.PathLike, vocab_size: int, **kwargs
) -> Path:
    """Train on both sides of a ``src<TAB>tgt`` pairs file; ``kwargs`` go to :func:`train_spm`."""

    def both_sides() -> Iterator[str]:
        for _, src, tgt in iter_pair_lines(pairs_tsv_gz):
            yield src
            yield tgt

    return train_spm(both_sides(), out_model, vocab_size, **kwargs)


class PieceEncoder:
    """Sentences → flat SentencePiece ids + offsets, the way P-SP sees them.

    Args:
        model: path to a ``.model`` file, or its bytes.
        lowercase: apply ``str.lower`` first (P-SP models are trained on lowercased text).
        max_pieces: keep at most this many pieces per sentence (after dropping unknowns).

    Example:
        >>> enc = PieceEncoder("results/spm/es-en.model")  # doctest: +SKIP
        >>> ids, offsets = enc.encode(["Hello world.", ""])  # doctest: +SKIP
        >>> ids[offsets[1] : offsets[2]]  # the empty sentence  # doctest: +SKIP
        array([0], dtype=int32)
    """

    def __init__(
        self,
        model: str | os.PathLike | bytes,
        lowercase: bool = True,
        max_pieces: int | None = None,
    ) -> None:
        if isinstance(model, bytes | bytearray):
            self.model_bytes = bytes(model)
        else:
            self.model_bytes = Path(model).read_bytes()
        if max_pieces is not None and max_pieces < 1:
            raise ValueError(f"max_pieces must be >= 1 or None, got {max_pieces}")
        self._sp = spm.SentencePieceProcessor(model_proto=self.model_bytes)
        self.lowercase = lowercase
        self.max_pieces = max_pieces
        self.vocab_size: int = self._sp.get_piece_size()
        self.unk_id: int = self._sp.unk_id()
        # Ids that carry no text of their own: <unk>, the filler of a sentence with no known
        # piece, and a bare word boundary, what is left of a word of unknown characters.
        boundary = self._sp.piece_to_id("\u2581")
        self.textless_ids = np.unique(np.array([self.unk_id, boundary], dtype=np.int32))
        self.sha256: str = hashlib.sha256(self.model_bytes).hexdigest()

    def pieces(self) -> list[str]:
        """Piece strings by id (row ``i`` of an embedding table is piece ``i``)."""
        return [self._sp.id_to_piece(i) for i in range(self.vocab_size)]

    def encode(
        self, sentences: Sequence[str], num_threads: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encode sentences with batched SentencePiece calls (``_ENCODE_BATCH`` sentences each).

        Args:
            sentences: the texts (a lone string is rejected rather than read as characters).
            num_threads: SentencePiece worker threads; ``None`` uses SentencePiece's default
                (all hardware threads).

        Returns:
            ``(ids, offsets)``: ``int32`` ids of all sentences back to back, and ``int64``
            offsets of length ``len(sentences) + 1`` so sentence ``i`` is
            ``ids[offsets[i]:offsets[i + 1]]``. Every sentence has at least one id.
        """
        if isinstance(sentences, str):
            raise TypeError("encode() takes a list of sentences, not a single string")
        texts = [s.lower() for s in sentences] if self.lowercase else list(sentences)
        kwargs = {} if num_threads is None else {"num_threads": num_threads}
        parts = [
            _flatten(
                self._sp.encode(texts[i : i + _ENCODE_BATCH], out_type=int, **kwargs),
                self.unk_id,
                self.max_pieces,
            )
            for i in range(0, len(texts), _ENCODE_BATCH)
        ]
        if len(parts) <= 1:
            return parts[0] if parts else _flatten([], self.unk_id, self.max_pieces)
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(np.concatenate([np.diff(part[1]) for part in parts]), out=offsets[1:])
        return np.concatenate([part[0] for part in parts]), offsets


def _flatten(
    pieces: list[list[int]], unk_id: int, max_pieces: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Turn per-sentence id lists into flat ids + offsets, dropping ``unk_id`` and truncating.

    The common case (no unknown, nothing empty, nothing too long) is two ``np.fromiter`` calls
    and a cumsum; the general case places each kept id at ``offsets[sentence] + rank`` with one
    scatter into an array pre-filled with ``unk_id``, which also gives empty sentences their
    ``[unk_id]``.
    """
    n = len(pieces)
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=n)
    flat = np.fromiter(
        itertools.chain.from_iterable(pieces), dtype=np.int32, count=int(lengths.sum())
    )
    offsets = np.zeros(n + 1, dtype=np.int64)
    keep = flat != unk_id
    too_long = max_pieces is not None and n and int(lengths.max()) > max_pieces
    if n == 0 or (keep.all() and not too_long and int(lengths.min()) > 0):
        np.cumsum(lengths, out=offsets[1:])
        return flat, offsets

    sentence = np.repeat(np.arange(n), lengths)[keep]
    ids = flat[keep]
    kept = np.bincount(sentence, minlength=n)
    rank = np.arange(len(ids)) - (np.cumsum(kept) - kept)[sentence]
    out_lengths = kept if max_pieces is None else np.minimum(kept, max_pieces)
    np.cumsum(np.maximum(out_lengths, 1), out=offsets[1:])
    if max_pieces is not None:
        inside = rank < max_pieces
        sentence, ids, rank = sentence[inside], ids[inside], rank[inside]
    out = np.full(int(offsets[-1]), unk_id, dtype=np.int32)
    out[offsets[sentence] + rank] = ids
    return out, offsets
