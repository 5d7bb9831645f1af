"""How a unigram SentencePiece model cuts a word, and how close it comes to cutting it another
way: the best cut and the gap between the scores of the two best, from the model's own lattice,
compiled.

The word cache (:mod:`psp.model.word_pieces`) keeps a word's ids only when its best cut beats
every other by a margin, since a near tie may come out either way inside a sentence. Asking
SentencePiece for its two best cuts (``nbest_encode`` of 2) took 5-14 µs a word; the same two
scores come from one pass over the word's lattice here, at about a microsecond, and the best
cut's pieces with them. Where the margin holds, that cut is the one SentencePiece's own search
keeps, so the cache takes its ids from here and asks SentencePiece only for the words whose best
cut holds an unknown character (merged into one ``<unk>`` or spelled in byte pieces by
SentencePiece): encoding a new word whole cost another 3-4 µs.

The lattice is SentencePiece's (``unigram::Model::PopulateNodes``) over the normalised word
(``SentencePieceProcessor.normalize``: the ``▁`` prefix, NFKC): at each character, a node for
every piece the text there begins with (a normal piece scores its log probability; an unused
piece has none), and where no piece of one character begins, an unknown node of one character
scoring the lowest piece score less 10. The two best paths' scores are kept at every character
(a two-best Viterbi), in float64 from the float32 piece scores, and where the best one came
from. A user-defined piece (scored by
SentencePiece with a bonus of its own) makes the word count as tied: the cache leaves it to
SentencePiece. The pieces are found through a hash table of every prefix of every piece
(:mod:`psp.model.byte_table`), in place of SentencePiece's trie: the search from a character
stops at the first text that begins no piece.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from psp.model import _loops
from psp.model.byte_table import empty_slots, joined, place

__all__ = ["PieceLattice", "piece_lattice"]

#: ``ModelProto.SentencePiece.Type`` values (sentencepiece_model.proto).
NORMAL, USER_DEFINED, UNUSED = 1, 4, 5
#: ``TrainerSpec.model_type`` of a unigram model (the one kind whose search can tie).
UNIGRAM = 1
#: What a prefix in the table is: only the beginning of longer pieces, a normal piece, or a
#: user-defined piece (the compiled search, :func:`psp.model._loops.cuts`, reads these values).
_PREFIX, _PIECE, _USER_DEFINED = 0, 1, 2
#: SentencePiece's ``kUnkPenalty``: an unknown character scores the lowest piece score less this.
UNK_PENALTY = np.float32(10.0)


class PieceLattice:
    """The lattice search of a unigram SentencePiece model: the :meth:`cuts` of whole words.

    Args:
        processor: the ``SentencePieceProcessor`` (its normaliser makes the lattice's text).
        proto: its parsed ``ModelProto``, a unigram model's (the pieces, their types and
            scores); :func:`piece_lattice` checks the kind.
    """

    def __init__(self, processor, proto):
        self._sp = processor
        # Unused pieces make no node; unknown, control and byte pieces no text.
        pieces = [
            (piece.piece, piece.type, piece.score, piece_id)
            for piece_id, piece in enumerate(proto.pieces)
            if piece.type in (NORMAL, USER_DEFINED)
        ]
        texts = [text for text, _, _, _ in pieces]
        # A piece's kind wins over its being a prefix: the pieces come first, then the
        # prefixes that are no piece.
        self.arena, self.arena_starts, self.hashes = _loops.with_prefixes(
            *joined([text.encode("utf-8") for text in texts])
        )
        items = len(self.hashes)
        self.slots = empty_slots(items)
        place(self.slots, self.hashes, 0, items)
        normal_scores = [score for _, kind, score, _ in pieces if kind == NORMAL]
        self.kinds = np.full(items, _PREFIX, dtype=np.int8)
        self.kinds[: len(texts)] = [
            _PIECE if kind == NORMAL else _USER_DEFINED for _, kind, _, _ in pieces
        ]
        self.scores = np.zeros(items, dtype=np.float32)
        self.scores[: len(texts)] = [score for _, _, score, _ in pieces]
        self.piece_ids = np.full(items, -1, dtype=np.int32)
        self.piece_ids[: len(texts)] = [piece_id for _, _, _, piece_id in pieces]
        lowest = np.float32(min(normal_scores)) if normal_scores else np.float32(0.0)
        self.unk_score = np.float32(lowest - UNK_PENALTY)

    def cuts(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each word's best cut and how far ahead of the next one it is, as SentencePiece's
        lattice scores them.

        Returns:
            ``(ids, lengths, gaps, unknown)``: the ids of the best cuts back to back (``int32``)
            and each word's count (``int64``); the score of each word's best cut less that of
            its second best (``inf`` where there is one cut, ``-inf`` where a user-defined piece
            may take part); and whether the best cut holds a character the model lacks, whose
            word's ids are left out (count 0): SentencePiece merges a run of unknown characters
            into one ``<unk>``, or spells them in byte pieces.
        """
        buf, starts = joined([text.encode("utf-8") for text in self._sp.normalize(list(words))])
        return _loops.cuts(
            buf,
            starts,
            self.slots,
            self.hashes,
            self.arena,
            self.arena_starts,
            self.kinds,
            self.scores,
            self.piece_ids,
            self.unk_score,
        )

    def gaps(self, words: Sequence[str]) -> np.ndarray:
        """The score of each word's best cut less that of its second best (see :meth:`cuts`)."""
        return self.cuts(words)[2]


def piece_lattice(processor) -> PieceLattice | None:
    """The lattice of a unigram model; ``None`` for another kind (BPE, word, char), whose cut
    of a word never ties."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(processor.serialized_model_proto())
    return PieceLattice(processor, proto) if proto.trainer_spec.model_type == UNIGRAM else None
