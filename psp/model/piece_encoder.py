"""The one tokenisation path shared by the training-pair store and inference: sentences to
SentencePiece ids the way P-SP sees them.

P-SP represents a sentence as the mean of its SentencePiece piece embeddings, so the exact id
sequence a sentence maps to must be the same when the training pairs are stored and when a
trained model embeds text. :class:`PieceEncoder` is that single path: :func:`model_text`
(lowercase, delete Unicode format characters), encode, drop unknown pieces, map a sentence with
no piece of text left to ``[unk_id]``, truncate. It returns flat ids plus offsets (the
``nn.EmbeddingBag`` layout). On the hot path of embedding it reads the text as
:func:`psp.model.text.model_utf8` bytes through the word cache, and does its post-processing in
vectorised numpy. The models it reads are trained by :mod:`psp.data.spm_training`, on
the same :func:`model_text` text.
"""

from __future__ import annotations

import hashlib
import os
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import sentencepiece as spm

from psp.io import iter_batches
from psp.model._loops import flatten
from psp.model.text import model_text, model_utf8
from psp.model.word_pieces import WordPieces, cache_is_exact, pieces_arrays

__all__ = ["PieceEncoder"]

# Sentences per SentencePiece or word-cache call: SentencePiece's Python-list result costs ~36
# bytes per id and the word cache's cut ~40 bytes per word, so bounding the batch bounds that
# transient memory whatever the caller passes (2,048: 5 MiB at most, against 20 at 8,192, for
# the same rate).
_ENCODE_BATCH = 2048


class PieceEncoder:
    """Sentences → flat SentencePiece ids + offsets, the way P-SP sees them.

    A sentence with no piece of text (empty, or only characters the model lacks, which leave
    ``<unk>`` pieces and bare word boundaries ``▁``) maps to ``[unk_id]``: the ``<unk>`` row is
    the one row no real text trains, whereas the ``▁`` row is a real piece (a boundary before a
    word that starts with a piece of its own). :class:`psp.model.torch_model.PSPModel` embeds
    such a sentence as the zero vector.

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
        self.boundary_id: int = self._sp.piece_to_id("\u2581")
        # (sorted() rather than np.unique, whose first call imports numpy.ma: 14 ms of start-up)
        textless = sorted({self.unk_id, self.boundary_id})
        self.textless_ids = np.array(textless, dtype=np.int32)
        self.sha256: str = hashlib.sha256(self.model_bytes).hexdigest()
        self._words = WordPieces(self._sp) if cache_is_exact(self.model_bytes) else None

    @property
    def _max_pieces(self) -> int:
        """:attr:`max_pieces` as the compiled :func:`~psp.model._loops.flatten` takes it (``-1``: no limit)."""
        return -1 if self.max_pieces is None else self.max_pieces

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
        parts = [
            flatten(
                *self._pieces(sentences[i : i + _ENCODE_BATCH], num_threads),
                self.unk_id,
                self.boundary_id,
                self._max_pieces,
            )
            for i in range(0, len(sentences), _ENCODE_BATCH)
        ]
        if len(parts) <= 1:
            if parts:
                return parts[0]
            return flatten(
                *self._pieces([], num_threads), self.unk_id, self.boundary_id, self._max_pieces
            )
        offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
        np.cumsum(np.concatenate([np.diff(part[1]) for part in parts]), out=offsets[1:])
        return np.concatenate([part[0] for part in parts]), offsets

    def _pieces(
        self, sentences: Sequence[str], num_threads: int | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """SentencePiece's ids of the :func:`model_text` of ``sentences``, flat, and each
        one's count: through the word cache (:mod:`psp.model.word_pieces`) on the compiled
        :func:`model_utf8` bytes where the model allows it, else sentence by sentence."""
        if self._words is not None:
            try:
                buf, starts, unmapped = model_utf8(sentences, self.lowercase)
            except UnicodeEncodeError:  # a lone surrogate: no UTF-8, SentencePiece takes it
                pass
            else:

                def texts_of(rows: np.ndarray) -> list[str]:
                    # The mapped bytes are the model text, but where ``unmapped`` says not
                    # (model_text's first call compiles a regex: 17 ms of a short job).
                    raw = buf.data
                    return [
                        model_text([sentences[k]], self.lowercase)[0]
                        if unmapped[k]
                        else str(raw[starts[k] : starts[k + 1]], "utf-8")
                        for k in rows
                    ]

                return self._words.encode_utf8(buf, starts, texts_of, num_threads, unmapped)
        texts = model_text(sentences, self.lowercase)
        kwargs = {} if num_threads is None else {"num_threads": num_threads}
        return pieces_arrays(self._sp.encode(texts, out_type=int, **kwargs))

    def unknown_stats(self, sentences: Iterable[str], top: int = 20) -> dict:
        """What :meth:`encode` loses of ``sentences``: the characters it drops as unknown.

        Characters are counted in the :func:`model_text` text, whitespace left out (it is never
        unknown); an unknown character is one SentencePiece maps to ``<unk>``, which
        :meth:`encode` drops. With byte fallback nothing is dropped and
        ``byte_fallback_chars`` counts the characters spelled as byte pieces instead.
        ``unknown_digits`` are the ASCII digits the model maps to ``<unk>``, probed one by one,
        whether or not the sentences contain them.

        Returns:
            ``lines``, ``chars``, ``unknown_chars``, ``unknown_char_share``,
            ``lines_with_unknown``, ``line_share``, ``unknown_digits`` and ``top_unknown``
            (the ``top`` most frequent unknown characters as ``[char, count]``, most frequent
            first), ``byte_fallback_chars``.
        """
        unknown: Counter[str] = Counter()
        lines = chars = lines_with_unknown = byte_chars = 0
        for batch in iter_batches(sentences, _ENCODE_BATCH):
            texts = model_text(batch, self.lowercase)
            lines += len(texts)
            chars += sum(len("".join(text.split())) for text in texts)
            for text, ids in zip(texts, self._sp.encode(texts, out_type=int), strict=True):
                has_unk = self.unk_id in ids
                has_byte = any(map(self._sp.is_byte, ids))
                if not (has_unk or has_byte):
                    continue
                lines_with_unknown += has_unk
                # The string form spells an unknown piece as its text; a byte piece as <0xNN>,
                # so a character spelled in bytes is one whose first piece is a byte piece.
                for piece_id, piece in zip(ids, self._sp.encode(text, out_type=str), strict=True):
                    if piece_id == self.unk_id:
                        unknown.update(c for c in piece if not c.isspace() and c != "\u2581")
                    elif self._sp.is_byte(piece_id) and int(piece[3:5], 16) >> 6 != 0b10:
                        byte_chars += 1
        n_unknown = sum(unknown.values())
        return {
            "lines": lines,
            "chars": chars,
            "unknown_chars": n_unknown,
            "unknown_char_share": n_unknown / chars if chars else 0.0,
            "lines_with_unknown": lines_with_unknown,
            "line_share": lines_with_unknown / lines if lines else 0.0,
            "unknown_digits": [d for d in string.digits if self.unk_id in self._sp.encode(d)],
            "top_unknown": [[char, count] for char, count in unknown.most_common(top)],
            "byte_fallback_chars": byte_chars,
        }
