"""Whole words' piece ids, cached: tokenisation at a dictionary lookup per word instead of a
SentencePiece run per sentence, with exactly SentencePiece's ids.

Natural text is Zipfian (120k news lines: 2.27M words of 63k types, the 10k most frequent
covering 88 % of them), so a cache from a word to its pieces answers almost every word. A new
word's pieces are SentencePiece's: the best cut of the model's own lattice for a unigram model
(:mod:`psp.model.unigram_ties`, the cut SentencePiece's search keeps wherever no other comes
close), SentencePiece's encoding of the word otherwise. It is exact because of how SentencePiece cuts text: after
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
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from psp.model._loops import find_words, gather, relookup
from psp.model.byte_table import empty_slots, joined, place
from psp.model.unigram_ties import piece_lattice

#: Distinct words a cache holds at most (a bounded memory, about 35 MB): beyond it, a new word
#: is encoded with its batch and not kept. The frequent words come first in any corpus.
CACHE_WORDS = 200_000

#: Two cuts of a word whose scores (sums of log probabilities, up to a few hundred in a
#: sentence) are this close may come out either way in a sentence: such a word is not cached.
TIE = 0.01


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


class Table(NamedTuple):
    """One state of the cache: the open-addressing ``slots`` (a word's index or -1), each word's
    hash and bytes (``arena[arena_starts[k]:arena_starts[k + 1]]``), its ids
    (``ids[starts[k]:starts[k] + lengths[k]]``) and whether its cut may tie."""

    slots: np.ndarray
    word_hashes: np.ndarray
    arena: np.ndarray
    arena_starts: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    ids: np.ndarray
    tied: np.ndarray

    @property
    def keys(self) -> tuple[np.ndarray, ...]:
        """What a lookup reads."""
        return self.slots, self.word_hashes, self.arena, self.arena_starts


class _Column:
    """An append-only array grown in place: what a published :class:`Table` holds is a view of
    its first ``size`` items, which an append never changes.

    Appending writes past the published items into spare capacity, and a full buffer is
    replaced by one of twice the size (the old one lives on in the views readers hold), so
    filling the cache copies each item about twice in all instead of the whole cache on every
    batch that brings new words (a 12 MiB cache was held twice at the peak of a first pass).
    """

    def __init__(self, dtype, initial=()):
        self.buffer = np.array(initial, dtype=dtype)
        self.size = len(self.buffer)

    def append(self, values: np.ndarray) -> np.ndarray:
        """Append ``values``; a view of everything appended so far."""
        need = self.size + len(values)
        if need > len(self.buffer):
            bigger = np.empty(max(need, 2 * len(self.buffer), 1024), dtype=self.buffer.dtype)
            bigger[: self.size] = self.buffer[: self.size]
            self.buffer = bigger
        self.buffer[self.size : need] = values
        self.size = need
        return self.buffer[:need]

    def view(self) -> np.ndarray:
        return self.buffer[: self.size]


class WordPieces:
    """SentencePiece encoding of sentences through a cache of whole words' ids.

    The cache is a compiled hash table from a word's UTF-8 bytes to its ids: a batch of texts
    is cut into words and looked up in one pass, and only the words it has not seen are cut,
    by a unigram model's lattice, which also says which of them may tie
    (:class:`psp.model.unigram_ties.PieceLattice`), or by SentencePiece.

    Threads look words up at once without a lock: the cache's state is one :class:`Table`,
    published in one assignment, whose items are never written once published. Adding words
    (under a lock, one thread at a time) appends them past the published items
    (:class:`_Column`), then enters them in empty slots, and publishes the new table: a lookup
    through an older table may meet a new word's slot, whose index is past its own words, and
    goes on past it (:func:`psp.model.byte_table.find`); the slots are built anew only when they
    fill up.

    Args:
        processor: the ``SentencePieceProcessor`` whose ids are cached (its model must pass
            :func:`cache_is_exact`).
        capacity: distinct words kept at most.
    """

    def __init__(self, processor, capacity: int = CACHE_WORDS):
        self._sp, self.capacity = processor, capacity
        self._columns = {
            "word_hashes": _Column(np.uint64),
            "arena": _Column(np.uint8),
            "arena_starts": _Column(np.int64, [0]),
            "starts": _Column(np.int64),
            "lengths": _Column(np.int64),
            "ids": _Column(np.int32),
            "tied": _Column(np.bool_),
        }
        self.table = Table(
            slots=np.full(1 << 10, -1, dtype=np.int32),
            **{name: column.view() for name, column in self._columns.items()},
        )
        self._lattice = piece_lattice(processor)
        self._lock = threading.Lock()

    @property
    def words(self) -> int:
        """Distinct words in the cache."""
        return len(self.table.word_hashes)

    def encode(
        self, texts: Sequence[str], num_threads: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """What ``processor.encode(texts)`` gives, as flat ``int32`` ids and ``int64``
        lengths per text."""
        try:
            encoded = [text.encode("utf-8") for text in texts]
        except UnicodeEncodeError:  # a lone surrogate: SentencePiece takes the text whole
            return self._encode_whole(texts, num_threads)
        buf, text_starts = joined(encoded)
        return self.encode_utf8(
            buf, text_starts, lambda rows: [texts[k] for k in rows], num_threads
        )

    def encode_utf8(
        self,
        buf: np.ndarray,
        text_starts: np.ndarray,
        texts_of: Callable[[np.ndarray], list[str]],
        num_threads: int | None = None,
        whole: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`encode` of texts given as UTF-8 bytes: text ``k`` is
        ``buf[text_starts[k]:text_starts[k + 1]]``.

        Args:
            texts_of: the texts of the given rows as strings, for the ones SentencePiece must
                encode whole.
            whole: rows to encode whole in any case.
        """
        flat, lengths, redo = self._encode_words(buf, text_starts, num_threads)
        if whole is not None:
            redo |= whole
        if not redo.any():
            return flat, lengths
        whole_ids = self._encode_whole(texts_of(np.flatnonzero(redo)), num_threads)
        return _replaced(flat, lengths, redo, *whole_ids)

    def _encode_whole(self, texts: Sequence[str], num_threads: int | None):
        kwargs = {} if num_threads is None else {"num_threads": num_threads}
        return pieces_arrays(self._sp.encode(list(texts), out_type=int, **kwargs))

    def _encode_words(self, buf, text_starts, num_threads):
        """The texts word by word through the cache: their ids, lengths, and which texts must
        be encoded whole: another whitespace character, a word whose cut may tie, or a word the
        full cache has no room for."""
        table = self.table
        begins, ends, hashes, found, counts, other = find_words(buf, text_starts, *table.keys)
        if self.words < self.capacity and (found < 0).any():
            with self._lock:
                # Another thread may have added some of them meanwhile.
                relookup(buf, begins, ends, hashes, found, *self.table.keys)
                self._add_missing(buf, begins, ends, hashes, found, num_threads)
                table = self.table
        flat, lengths, redo = gather(
            found, counts, table.starts, table.lengths, table.ids, table.tied
        )
        return flat, lengths, redo | other

    def _add_missing(self, buf, begins, ends, hashes, found, num_threads) -> None:
        """Encode the words not in the cache (each once) and add as many as it has room for;
        ``found`` gets their indices. Words are told apart by hash here and by their bytes in
        the lookup after, so a word whose hash another new word has stays out (and its text is
        encoded whole)."""
        missing = np.flatnonzero(found < 0)
        _, first_seen = np.unique(hashes[missing], return_index=True)
        new = missing[np.sort(first_seen)][: self.capacity - self.words]
        if len(new) == 0:
            return
        raw = buf.tobytes()
        self._grow([raw[begins[w] : ends[w]] for w in new], hashes[new], num_threads)
        relookup(buf, begins, ends, hashes, found, *self.table.keys)

    def _grow(self, words: list[bytes], hashes: np.ndarray, num_threads: int | None) -> None:
        """Publish a table with ``words`` (UTF-8, new) added, their hashes, ids and ties."""
        flat, lengths, tied = self._cut([word.decode("utf-8") for word in words], num_threads)
        old, columns = self.table, self._columns
        first = len(old.word_hashes)
        sizes = np.fromiter(map(len, words), np.int64, len(words))
        grown = {
            "word_hashes": columns["word_hashes"].append(hashes),
            "arena": columns["arena"].append(np.frombuffer(b"".join(words), np.uint8)),
            "arena_starts": columns["arena_starts"].append(old.arena_starts[-1] + np.cumsum(sizes)),
            "starts": columns["starts"].append(len(old.ids) + _starts(lengths)),
            "lengths": columns["lengths"].append(lengths),
            "ids": columns["ids"].append(flat),
            "tied": columns["tied"].append(tied),
        }
        words_now = len(grown["word_hashes"])
        if 2 * words_now > len(old.slots):
            slots = empty_slots(words_now)
            place(slots, grown["word_hashes"], 0, words_now)
        else:
            # Only empty slots are written, after the words' items: see the class docstring.
            slots = old.slots
            place(slots, grown["word_hashes"], first, words_now)
        self.table = Table(slots=slots, **grown)

    def _cut(self, words: list[str], num_threads: int | None):
        """Each word's ids (flat, and their counts) and whether its cut may tie: a unigram
        model's best cut from its lattice (SentencePiece's ids wherever the margin holds), and
        SentencePiece's own ids for a word whose best cut holds an unknown character, or for
        every word of another kind of model (whose cut never ties)."""
        if self._lattice is None:
            flat, lengths = self._encode_whole(words, num_threads)
            return flat, lengths, np.zeros(len(words), dtype=bool)
        flat, lengths, gaps, unknown = self._lattice.cuts(words)
        if unknown.any():
            spelled = self._encode_whole([words[k] for k in np.flatnonzero(unknown)], num_threads)
            flat, lengths = _replaced(flat, lengths, unknown, *spelled)
        return flat, lengths, gaps < TIE


def _replaced(
    flat: np.ndarray, lengths: np.ndarray, rows: np.ndarray, new_flat: np.ndarray, new_lengths
) -> tuple[np.ndarray, np.ndarray]:
    """Flat ids and counts (``lengths``, changed in place) with the ids of the ``rows`` (a mask)
    replaced by ``new_flat`` (their counts ``new_lengths``, in order)."""
    keep = ~rows
    kept = flat[_spans(_starts(lengths)[keep], lengths[keep])]
    lengths[rows] = new_lengths
    starts = _starts(lengths)
    out = np.empty(int(lengths.sum()), dtype=np.int32)
    out[_spans(starts[keep], lengths[keep])] = kept
    out[_spans(starts[rows], new_lengths)] = new_flat
    return out, lengths


def _starts(lengths: np.ndarray) -> np.ndarray:
    """Where each of consecutive runs of ``lengths`` begins."""
    return np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[k] + 0 .. lengths[k] - 1`` for every ``k``, one after the other."""
    return np.repeat(starts - _starts(lengths), lengths) + np.arange(int(lengths.sum()))
