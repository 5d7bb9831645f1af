"""Whole words' piece ids, cached: tokenisation at a dictionary lookup per word instead of a
SentencePiece run per sentence, with exactly SentencePiece's ids.

Natural text is Zipfian (120k news lines: 2.27M words of 63k types, the 10k most frequent
covering 88 % of them), so a cache from a word to its pieces, filled by SentencePiece itself,
answers almost every word. It is exact because of how SentencePiece cuts text: after
normalisation, a piece never spans a word boundary (``split_by_whitespace``: the boundary mark
``▁`` only begins a piece), and every word is encoded as ``▁`` + the word (``add_dummy_prefix``,
with runs of spaces made one, ``remove_extra_whitespaces``). A sentence's ids are then its words'
ids one after the other, each word's those of the word encoded alone. :func:`cache_is_exact`
checks those settings in the model; a model without them is encoded sentence by sentence. So
is any sentence with a whitespace character other than the space, which Python and
SentencePiece may not split alike (a tab, a no-break space), and any sentence with a word that
a unigram model can cut two ways of the same score ("3000" as 3·00·0 or 3·0·00): which one the
sentence's search keeps depends on the float sum of the scores before the word, so only the
whole sentence says (:data:`TIE`).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence

import numba
import numpy as np

#: Distinct words a cache holds at most (a bounded memory, about 35 MB): beyond it, a new word
#: is encoded with its batch and not kept. The frequent words come first in any corpus.
CACHE_WORDS = 200_000

#: Two cuts of a word whose scores (sums of log probabilities, up to a few hundred in a
#: sentence) are this close may come out either way in a sentence: such a word is not cached.
TIE = 0.01
#: ``TrainerSpec.model_type`` of a unigram model (the one kind whose search can tie).
UNIGRAM = 1


def cache_is_exact(model_bytes: bytes) -> bool:
    """Whether a SentencePiece model cuts text at spaces the way :class:`WordPieces` assumes."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model_bytes)
    normalizer, trainer = proto.normalizer_spec, proto.trainer_spec
    return bool(
        normalizer.add_dummy_prefix
        and normalizer.remove_extra_whitespaces
        and normalizer.escape_whitespaces
        and trainer.split_by_whitespace
        and not trainer.treat_whitespace_as_suffix
    )


def pieces_arrays(pieces: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-sentence id lists as flat ``int32`` ids and ``int64`` lengths."""
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    flat = np.fromiter(
        itertools.chain.from_iterable(pieces), dtype=np.int32, count=int(lengths.sum())
    )
    return flat, lengths


_JIT = {"nogil": True, "cache": True, "error_model": "numpy"}
_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


@numba.njit(**_JIT)
def _other_whitespace(buf, i):
    """Whether a whitespace character other than the space starts at byte ``i`` of UTF-8
    ``buf`` (Python's ``str.isspace`` set: what ``str.split`` would cut at, and SentencePiece
    might not)."""
    b = buf[i]
    if b < 0x80:
        return (9 <= b <= 13) or (28 <= b <= 31)
    n = buf.shape[0]
    b1 = buf[i + 1] if i + 1 < n else 0
    b2 = buf[i + 2] if i + 2 < n else 0
    if b == 0xC2:
        return b1 == 0x85 or b1 == 0xA0
    if b == 0xE1:
        return b1 == 0x9A and b2 == 0x80
    if b == 0xE2:
        return (b1 == 0x80 and (b2 <= 0x8A or b2 in (0xA8, 0xA9, 0xAF))) or (
            b1 == 0x81 and b2 == 0x9F
        )
    if b == 0xE3:
        return b1 == 0x80 and b2 == 0x80
    return False


@numba.njit(**_JIT)
def _count_words(buf, text_starts):
    """Words (runs of bytes other than the space) in ``buf``'s texts."""
    words = 0
    for k in range(text_starts.shape[0] - 1):
        previous = 32
        for i in range(text_starts[k], text_starts[k + 1]):
            words += previous == 32 and buf[i] != 32
            previous = buf[i]
    return words


@numba.njit(**_JIT)
def _scan(buf, text_starts):
    """Cut each text of ``buf`` (UTF-8, text ``k`` at ``text_starts[k]:text_starts[k + 1]``)
    at spaces: each word's byte span and FNV-1a hash, each text's word count, and whether a
    text holds another whitespace character."""
    n_texts = text_starts.shape[0] - 1
    n_words = _count_words(buf, text_starts)
    begins = np.empty(n_words, dtype=np.int64)
    ends = np.empty(n_words, dtype=np.int64)
    hashes = np.empty(n_words, dtype=np.uint64)
    counts = np.zeros(n_texts, dtype=np.int64)
    other = np.zeros(n_texts, dtype=np.bool_)
    w = 0
    for k in range(n_texts):
        i, stop = text_starts[k], text_starts[k + 1]
        while i < stop:
            while i < stop and buf[i] == 32:
                i += 1
            if i == stop:
                break
            begins[w] = i
            h = _FNV_OFFSET
            while i < stop and buf[i] != 32:
                if buf[i] >= 0x80 or buf[i] < 32:
                    other[k] |= _other_whitespace(buf, i)
                h = (h ^ np.uint64(buf[i])) * _FNV_PRIME
                i += 1
            ends[w], hashes[w] = i, h
            counts[k] += 1
            w += 1
    return begins, ends, hashes, counts, other


@numba.njit(**_JIT)
def _same(buf, begin, end, arena, arena_begin, arena_end):
    if end - begin != arena_end - arena_begin:
        return False
    for j in range(end - begin):
        if buf[begin + j] != arena[arena_begin + j]:
            return False
    return True


@numba.njit(**_JIT)
def _lookup(buf, begins, ends, hashes, slots, word_hashes, arena, arena_starts):
    """Each word's index in the table (open addressing on its hash, the bytes compared), or
    -1."""
    mask = np.uint64(slots.shape[0] - 1)
    found = np.empty(begins.shape[0], dtype=np.int64)
    for w in range(begins.shape[0]):
        slot = hashes[w] & mask
        found[w] = -1
        while slots[slot] >= 0:
            k = slots[slot]
            if word_hashes[k] == hashes[w] and _same(
                buf, begins[w], ends[w], arena, arena_starts[k], arena_starts[k + 1]
            ):
                found[w] = k
                break
            slot = (slot + np.uint64(1)) & mask
    return found


@numba.njit(**_JIT)
def _place(slots, word_hashes, first, last):
    """Put words ``first:last`` (their hashes known) into free slots."""
    mask = np.uint64(slots.shape[0] - 1)
    for k in range(first, last):
        slot = word_hashes[k] & mask
        while slots[slot] >= 0:
            slot = (slot + np.uint64(1)) & mask
        slots[slot] = k


class WordPieces:
    """SentencePiece encoding of sentences through a cache of whole words' ids.

    The cache is a compiled hash table from a word's UTF-8 bytes to its ids: a batch of texts
    is cut into words, hashed and looked up in one pass each, and only the words it has not seen
    go to SentencePiece (with ``nbest`` 2, to find the words whose cut may tie).

    Args:
        processor: the ``SentencePieceProcessor`` whose ids are cached (its model must pass
            :func:`cache_is_exact`).
        capacity: distinct words kept at most.
    """

    def __init__(self, processor, capacity: int = CACHE_WORDS):
        self._sp, self.capacity = processor, capacity
        self.slots = np.full(1 << 10, -1, dtype=np.int64)
        self.word_hashes = np.zeros(0, dtype=np.uint64)
        self.arena = np.zeros(0, dtype=np.uint8)
        self.arena_starts = np.zeros(1, dtype=np.int64)
        self.starts = np.zeros(0, dtype=np.int64)
        self.lengths = np.zeros(0, dtype=np.int64)
        self.ids = np.zeros(0, dtype=np.int32)
        self.tied = np.zeros(0, dtype=bool)
        unigram = _model_type(processor.serialized_model_proto()) == UNIGRAM
        vocab = processor.get_piece_size()
        self.scores = np.array([processor.get_score(i) for i in range(vocab)]) if unigram else None
        self._lock = threading.Lock()

    @property
    def words(self) -> int:
        """Distinct words in the cache."""
        return len(self.word_hashes)

    def encode(
        self, texts: Sequence[str], num_threads: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """What ``processor.encode(texts)`` gives, as flat ``int32`` ids and ``int64``
        lengths per text."""
        kwargs = {} if num_threads is None else {"num_threads": num_threads}
        try:
            encoded = [text.encode("utf-8") for text in texts]
        except UnicodeEncodeError:  # a lone surrogate: SentencePiece takes the text whole
            return pieces_arrays(self._sp.encode(list(texts), out_type=int, **kwargs))
        buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        text_starts = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=text_starts[1:])
        with self._lock:
            flat, lengths, whole = self._encode_words(buf, text_starts, kwargs)
        if not whole.any():
            return flat, lengths
        keep = ~whole
        flat = flat[_spans(_starts(lengths)[keep], lengths[keep])]
        rest = [text for text, w in zip(texts, whole) if w]
        flat_whole, lengths_whole = pieces_arrays(self._sp.encode(rest, out_type=int, **kwargs))
        lengths[whole] = lengths_whole
        starts = _starts(lengths)
        out = np.empty(int(lengths.sum()), dtype=np.int32)
        out[_spans(starts[keep], lengths[keep])] = flat
        out[_spans(starts[whole], lengths_whole)] = flat_whole
        return out, lengths

    def _encode_words(self, buf, text_starts, kwargs):
        """The texts word by word through the cache: their ids, lengths, and which texts must
        be encoded whole: another whitespace character, a word whose cut may tie, or a word the
        full cache has no room for."""
        begins, ends, hashes, counts, other = _scan(buf, text_starts)
        found = _lookup(
            buf, begins, ends, hashes, self.slots, self.word_hashes, self.arena, self.arena_starts
        )
        if (found < 0).any() and self.words < self.capacity:
            self._add_missing(buf, begins, ends, hashes, found, kwargs)
        missing = found < 0
        found[missing] = 0  # their texts are encoded whole; any index will do meanwhile
        word_lengths = self.lengths[found] if self.words else np.zeros(len(found), np.int64)
        flat = self.ids[_spans(self.starts[found], word_lengths)] if self.words else self.ids
        bounds = np.concatenate(([0], np.cumsum(counts)))
        ends_ids = np.concatenate(([0], np.cumsum(word_lengths)))
        unusable = missing | (self.tied[found] if self.words else missing)
        bad = np.concatenate(([0], np.cumsum(unusable)))
        lengths = ends_ids[bounds[1:]] - ends_ids[bounds[:-1]]
        return flat, lengths, other | (bad[bounds[1:]] > bad[bounds[:-1]])

    def _add_missing(self, buf, begins, ends, hashes, found, kwargs) -> None:
        """Encode the words not in the cache (each once) and add as many as it has room for;
        ``found`` gets their indices."""
        missing = np.flatnonzero(found < 0)
        raw = buf.tobytes()
        new: dict[bytes, int] = {}
        for w in missing:
            new.setdefault(raw[begins[w] : ends[w]], int(w))
        words = list(new)[: self.capacity - self.words]
        first = self.words
        self._grow(words, hashes[[new[word] for word in words]], kwargs)
        index = dict(zip(words, range(first, first + len(words))))
        found[missing] = [index.get(raw[begins[w] : ends[w]], -1) for w in missing]

    def _grow(self, words: list[bytes], hashes: np.ndarray, kwargs) -> None:
        """Add ``words`` (UTF-8, new) with their hashes, ids and ties to the table."""
        texts = [word.decode("utf-8") for word in words]
        flat, lengths = pieces_arrays(self._sp.encode(texts, out_type=int, **kwargs))
        first = self.words
        self.word_hashes = np.concatenate((self.word_hashes, hashes))
        sizes = np.fromiter(map(len, words), np.int64, len(words))
        self.arena = np.concatenate((self.arena, np.frombuffer(b"".join(words), np.uint8)))
        self.arena_starts = np.concatenate(
            (self.arena_starts, self.arena_starts[-1] + np.cumsum(sizes))
        )
        self.starts = np.concatenate((self.starts, len(self.ids) + _starts(lengths)))
        self.lengths = np.concatenate((self.lengths, lengths))
        self.ids = np.concatenate((self.ids, flat))
        self.tied = np.concatenate((self.tied, self._ties(texts)))
        if 2 * self.words > len(self.slots):
            self.slots = np.full(1 << (2 * self.words).bit_length(), -1, dtype=np.int64)
            _place(self.slots, self.word_hashes, 0, self.words)
        else:
            _place(self.slots, self.word_hashes, first, self.words)

    def _ties(self, words: list[str]) -> np.ndarray:
        """Whether each word's two best cuts score within :data:`TIE` (unigram models)."""
        if self.scores is None:
            return np.zeros(len(words), dtype=bool)
        best = self._sp.nbest_encode_as_ids(words, nbest_size=2)
        totals = []
        for rank in (0, 1):
            flat, lengths = pieces_arrays([cuts[rank] if len(cuts) > rank else [] for cuts in best])
            running = np.concatenate(([0.0], np.cumsum(self.scores[flat])))
            starts = _starts(lengths)
            totals.append(
                np.where(lengths > 0, running[starts + lengths] - running[starts], np.inf)
            )
        return np.abs(totals[0] - totals[1]) < TIE


def _model_type(model_bytes: bytes) -> int:
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model_bytes)
    return proto.trainer_spec.model_type


def _starts(lengths: np.ndarray) -> np.ndarray:
    """Where each of consecutive runs of ``lengths`` begins."""
    return np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[k] + 0 .. lengths[k] - 1`` for every ``k``, one after the other."""
    return np.repeat(starts - _starts(lengths), lengths) + np.arange(int(lengths.sum()))
