# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled loops of inference: text to piece ids to sentence vectors, compiled ahead of time.

Every loop that ``embed`` runs per byte, word or piece is here, compiled with the package (Cython,
C): the code-point mapping of :func:`psp.model.text.model_utf8`, the hash tables of
:mod:`psp.model.byte_table`, the word cache's finder and gatherer (:mod:`psp.model.word_pieces`),
the unigram lattice's table of piece prefixes, its best cut and margin (:mod:`psp.model.unigram_ties`), the id flattening of
:class:`psp.model.piece_encoder.PieceEncoder`, and the pooling and float16 cast of
:mod:`psp.model.pooling`. Each of those modules documents what its loops compute; this one only
computes it.

Why ahead of time: a JIT (numba, which compiled these loops before) cost a process about 130 MiB
and 0.5-2.5 s before its first vector (its import, then loading its cached machine code through
LLVM), as much memory as the encoder itself. Compiled here, the loops cost a process the pages of
one shared library: ``psp embed`` on one line took a third of the time and 91 MiB against 233
(``docs/benchmarks.md``).

Every loop releases the GIL while it runs (its outputs are allocated first, under the GIL), so
threads tokenise and pool at once. Arithmetic is the compiled code's, in the order written
(float32 sums of rows added one after the other, no contraction): the same bits on every CPU.
Boolean arrays are passed and returned as numpy ``bool`` and read through ``uint8`` views.
"""

import numpy as np

from libc.math cimport INFINITY, fabs, rint
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memset

#: FNV-1a: a string's hash is built one byte at a time, ``h = (h ^ byte) * FNV_PRIME`` from
#: ``FNV_OFFSET``, so a caller extending a string byte by byte has the hash of every prefix.
cdef uint64_t FNV_OFFSET = 0xCBF29CE484222325ULL
cdef uint64_t FNV_PRIME = 0x100000001B3ULL

#: What a prefix in the lattice's table is (:mod:`psp.model.unigram_ties`).
cdef int8_t PREFIX = 0
cdef int8_t USER_DEFINED = 2
#: Added to a float32's bits to rebias its exponent for float16 (modulo 2**32) and round.
cdef uint32_t HALF_REBIAS = 0xC8000FFFU


def _bools(array):
    """A numpy bool array's bytes, for a ``uint8`` memoryview."""
    return array.view(np.uint8)


# --- hash tables of byte strings (psp.model.byte_table) -----------------------------------------


cdef inline bint _same(
    const uint8_t* buf, int64_t begin, int64_t end,
    const uint8_t* arena, int64_t arena_begin, int64_t arena_end,
) noexcept nogil:
    cdef int64_t j
    if end - begin != arena_end - arena_begin:
        return False
    for j in range(end - begin):
        if buf[begin + j] != arena[arena_begin + j]:
            return False
    return True


cdef inline int64_t _find(
    const uint8_t* buf, int64_t begin, int64_t end, uint64_t h,
    const int32_t* slots, uint64_t n_slots, const uint64_t* hashes, int64_t items,
    const uint8_t* arena, const int64_t* arena_starts,
) noexcept nogil:
    """The index of the item ``buf[begin:end]`` of hash ``h``, or -1; a slot holding an item
    added after the caller took its arrays (index past ``items``) is passed over."""
    cdef uint64_t mask = n_slots - 1
    cdef uint64_t slot = h & mask
    cdef int64_t k
    while slots[slot] >= 0:
        k = slots[slot]
        if (
            k < items
            and hashes[k] == h
            and _same(buf, begin, end, arena, arena_starts[k], arena_starts[k + 1])
        ):
            return k
        slot = (slot + 1) & mask
    return -1


cdef struct Table:
    const int32_t* slots
    uint64_t n_slots
    const uint64_t* hashes
    int64_t items
    const uint8_t* arena
    const int64_t* arena_starts


cdef inline Table _table(
    const int32_t[::1] slots, const uint64_t[::1] hashes,
    const uint8_t[::1] arena, const int64_t[::1] arena_starts,
) noexcept:
    cdef Table table
    table.slots = &slots[0]
    table.n_slots = slots.shape[0]
    table.hashes = &hashes[0] if hashes.shape[0] else NULL
    table.items = hashes.shape[0]
    table.arena = &arena[0] if arena.shape[0] else NULL
    table.arena_starts = &arena_starts[0]
    return table


cdef inline int64_t _lookup(const uint8_t* buf, int64_t begin, int64_t end, uint64_t h, Table t) noexcept nogil:
    return _find(buf, begin, end, h, t.slots, t.n_slots, t.hashes, t.items, t.arena, t.arena_starts)


def place(int32_t[::1] slots, const uint64_t[::1] hashes, int64_t first, int64_t last):
    """Put items ``first:last`` (their hashes known) into free slots."""
    cdef uint64_t mask = slots.shape[0] - 1
    cdef uint64_t slot
    cdef int64_t k
    with nogil:
        for k in range(first, last):
            slot = hashes[k] & mask
            while slots[slot] >= 0:
                slot = (slot + 1) & mask
            slots[slot] = <int32_t>k


def with_prefixes(const uint8_t[::1] arena, const int64_t[::1] arena_starts):
    """The items of ``arena`` (distinct byte strings), then each proper prefix of one of them
    that ends at a UTF-8 character boundary and is no item itself, once: their bytes, starts and
    hashes (the piece lattice's table, :class:`psp.model.unigram_ties.PieceLattice`)."""
    cdef int64_t n = arena_starts.shape[0] - 1, k, i, begin, end, at, step, count = 0, o = 0
    cdef int64_t most_items = n, most_bytes = 0
    cdef const uint8_t* a = &arena[0] if arena.shape[0] else NULL
    cdef uint64_t h
    for k in range(n):
        begin, end = arena_starts[k], arena_starts[k + 1]
        most_bytes += end - begin
        at = begin + _char_length(a[begin], end - begin) if end > begin else end
        while at < end:
            most_items += 1
            most_bytes += at - begin
            at += _char_length(a[at], end - at)
    out_arena_a = np.empty(most_bytes, dtype=np.uint8)
    out_starts_a = np.zeros(most_items + 1, dtype=np.int64)
    out_hashes_a = np.empty(most_items, dtype=np.uint64)
    slots_a = np.full(1 << (2 * most_items).bit_length(), -1, dtype=np.int32)
    cdef uint8_t[::1] out_arena_v = out_arena_a
    cdef int64_t[::1] out_starts_v = out_starts_a
    cdef uint64_t[::1] out_hashes_v = out_hashes_a
    cdef int32_t[::1] slots_v = slots_a
    cdef uint8_t* out_arena = &out_arena_v[0] if most_bytes else NULL
    cdef int64_t* out_starts = &out_starts_v[0]
    cdef uint64_t* out_hashes = &out_hashes_v[0] if most_items else NULL
    cdef int32_t* slots = &slots_v[0]
    cdef uint64_t mask = slots_v.shape[0] - 1
    with nogil:
        # The items first, then their prefixes: an item's kind wins over its being a prefix.
        for k in range(n):
            h = FNV_OFFSET
            for i in range(arena_starts[k], arena_starts[k + 1]):
                h = (h ^ a[i]) * FNV_PRIME
                out_arena[o] = a[i]
                o += 1
            _append(slots, mask, out_hashes, out_starts, count, h, o)
            count += 1
        for k in range(n):
            begin, end = arena_starts[k], arena_starts[k + 1]
            h = FNV_OFFSET
            at = begin
            while at < end:
                step = _char_length(a[at], end - at)
                h = _extended(h, a, at, at + step)
                at += step
                if at == end:
                    break
                if _find(a, begin, at, h, slots, mask + 1, out_hashes, count, out_arena, out_starts) >= 0:
                    continue
                for i in range(begin, at):
                    out_arena[o] = a[i]
                    o += 1
                _append(slots, mask, out_hashes, out_starts, count, h, o)
                count += 1
    return out_arena_a[:o], out_starts_a[: count + 1], out_hashes_a[:count]


cdef inline uint64_t _extended(uint64_t h, const uint8_t* b, int64_t begin, int64_t end) noexcept nogil:
    """The hash ``h`` of a string extended by the bytes ``b[begin:end]``."""
    cdef int64_t i
    for i in range(begin, end):
        h = (h ^ b[i]) * FNV_PRIME
    return h


cdef inline void _append(
    int32_t* slots, uint64_t mask, uint64_t* hashes, int64_t* starts, int64_t k, uint64_t h,
    int64_t end,
) noexcept nogil:
    """Enter item ``k`` (hash ``h``, its bytes ending at ``end``) in the first free slot."""
    cdef uint64_t slot = h & mask
    hashes[k] = h
    starts[k + 1] = end
    while slots[slot] >= 0:
        slot = (slot + 1) & mask
    slots[slot] = <int32_t>k


# --- the word cache (psp.model.word_pieces) -----------------------------------------------------


cdef inline bint _other_whitespace(const uint8_t* buf, int64_t i, int64_t n) noexcept nogil:
    """Whether a whitespace character other than the space starts at byte ``i`` (Python's
    ``str.isspace`` set)."""
    cdef uint8_t b = buf[i]
    cdef uint8_t b1, b2
    if b < 0x80:
        return (9 <= b <= 13) or (28 <= b <= 31)
    b1 = buf[i + 1] if i + 1 < n else 0
    b2 = buf[i + 2] if i + 2 < n else 0
    if b == 0xC2:
        return b1 == 0x85 or b1 == 0xA0
    if b == 0xE1:
        return b1 == 0x9A and b2 == 0x80
    if b == 0xE2:
        return (b1 == 0x80 and (b2 <= 0x8A or b2 == 0xA8 or b2 == 0xA9 or b2 == 0xAF)) or (
            b1 == 0x81 and b2 == 0x9F
        )
    if b == 0xE3:
        return b1 == 0x80 and b2 == 0x80
    return False


def find_words(
    const uint8_t[::1] buf, const int64_t[::1] text_starts,
    const int32_t[::1] slots, const uint64_t[::1] word_hashes,
    const uint8_t[::1] arena, const int64_t[::1] arena_starts,
):
    """Cut each text at spaces and look each word up: ``begins, ends, hashes, found`` per word
    (``found``: the table index, -1 when absent), ``counts`` per text, and ``other`` per text
    (it holds another whitespace character). Words are counted first: exact-size arrays."""
    cdef Table table = _table(slots, word_hashes, arena, arena_starts)
    cdef int64_t n_texts = text_starts.shape[0] - 1, n = buf.shape[0]
    cdef const uint8_t* b = &buf[0] if n else NULL
    cdef int64_t words = 0, k, i, stop, w
    cdef uint8_t previous
    cdef uint64_t h
    with nogil:
        for k in range(n_texts):
            previous = 32
            for i in range(text_starts[k], text_starts[k + 1]):
                words += b[i] != 32 and previous == 32
                previous = b[i]
    begins_a = np.empty(words, dtype=np.int64)
    ends_a = np.empty(words, dtype=np.int64)
    hashes_a = np.empty(words, dtype=np.uint64)
    found_a = np.empty(words, dtype=np.int64)
    counts_a = np.zeros(n_texts, dtype=np.int64)
    other_a = np.zeros(n_texts, dtype=np.bool_)
    cdef int64_t[::1] begins = begins_a, ends = ends_a, found = found_a, counts = counts_a
    cdef uint64_t[::1] hashes = hashes_a
    cdef uint8_t[::1] other = _bools(other_a)
    with nogil:
        w = 0
        for k in range(n_texts):
            i, stop = text_starts[k], text_starts[k + 1]
            while i < stop:
                while i < stop and b[i] == 32:
                    i += 1
                if i == stop:
                    break
                begins[w] = i
                h = FNV_OFFSET
                while i < stop and b[i] != 32:
                    if b[i] >= 0x80 or b[i] < 32:
                        other[k] |= _other_whitespace(b, i, n)
                    h = (h ^ b[i]) * FNV_PRIME
                    i += 1
                ends[w] = i
                hashes[w] = h
                found[w] = _lookup(b, begins[w], i, h, table)
                counts[k] += 1
                w += 1
    return begins_a, ends_a, hashes_a, found_a, counts_a, other_a


def relookup(
    const uint8_t[::1] buf, const int64_t[::1] begins, const int64_t[::1] ends,
    const uint64_t[::1] hashes, int64_t[::1] found,
    const int32_t[::1] slots, const uint64_t[::1] word_hashes,
    const uint8_t[::1] arena, const int64_t[::1] arena_starts,
):
    """Look up again the words ``found`` does not have (after the table grew)."""
    cdef Table table = _table(slots, word_hashes, arena, arena_starts)
    cdef const uint8_t* b = &buf[0] if buf.shape[0] else NULL
    cdef int64_t w
    with nogil:
        for w in range(found.shape[0]):
            if found[w] < 0:
                found[w] = _lookup(b, begins[w], ends[w], hashes[w], table)


def gather(
    const int64_t[::1] found, const int64_t[::1] counts,
    const int64_t[::1] word_starts, const int64_t[::1] word_lengths,
    const int32_t[::1] ids, tied_array,
):
    """Each text's ids (its words' cached ids one after the other), its id count, and whether it
    must be encoded whole (a word not in the table, or one whose cut may tie)."""
    cdef const uint8_t[::1] tied = _bools(tied_array)
    cdef int64_t n_texts = counts.shape[0], total = 0, w, k, c, j, o, index, first
    with nogil:
        for w in range(found.shape[0]):
            if found[w] >= 0:
                total += word_lengths[found[w]]
    flat_a = np.empty(total, dtype=np.int32)
    lengths_a = np.zeros(n_texts, dtype=np.int64)
    whole_a = np.zeros(n_texts, dtype=np.bool_)
    cdef int32_t[::1] flat = flat_a
    cdef int64_t[::1] lengths = lengths_a
    cdef uint8_t[::1] whole = _bools(whole_a)
    with nogil:
        w = o = 0
        for k in range(n_texts):
            for c in range(counts[k]):
                index = found[w]
                w += 1
                if index < 0 or tied[index]:
                    whole[k] = True
                    if index < 0:
                        continue
                first = word_starts[index]
                for j in range(word_lengths[index]):
                    flat[o] = ids[first + j]
                    o += 1
                lengths[k] += word_lengths[index]
    return flat_a, lengths_a, whole_a


# --- the unigram lattice (psp.model.unigram_ties) -----------------------------------------------


cdef inline int64_t _char_length(uint8_t lead, int64_t left) noexcept nogil:
    """Bytes of the UTF-8 character whose first byte is ``lead``, at most ``left``."""
    cdef uint8_t top = lead >> 4
    cdef int64_t n = 4 if top == 15 else 3 if top == 14 else 2 if top >= 12 else 1
    return n if n < left else left


cdef inline void _arrive(
    double* best, double* second, int64_t* came_from, int32_t* came_by, int64_t to,
    int64_t at, int32_t by, double through_best, double through_second,
) noexcept nogil:
    """Keep the two best scores of reaching position ``to`` from ``at`` by piece ``by``, through
    the best and the second best ways to ``at``, and where the best way came from. A score equal
    to the best is a second best: the two cuts tie."""
    if through_best > best[to]:
        second[to] = best[to]
        best[to] = through_best
        came_from[to] = at
        came_by[to] = by
    elif through_best > second[to]:
        second[to] = through_best
    if through_second > second[to]:  # never above the best: through_second <= through_best
        second[to] = through_second


def cuts(
    const uint8_t[::1] buf, const int64_t[::1] starts,
    const int32_t[::1] slots, const uint64_t[::1] hashes,
    const uint8_t[::1] arena, const int64_t[::1] arena_starts,
    const int8_t[::1] kinds, const float[::1] scores, const int32_t[::1] piece_ids,
    float unk_score,
):
    """For each text (a normalised word, UTF-8): the ids of its best cut (flat) and their count,
    its best cut's score less its second best's (``inf``: one cut only; ``-inf``: a user-defined
    piece may take part), and whether the best cut holds an unknown character (its ids are then
    left out: SentencePiece merges a run of them, or spells them in bytes)."""
    cdef Table table = _table(slots, hashes, arena, arena_starts)
    cdef int64_t n = starts.shape[0] - 1, longest = 0, k, first, stop, size, begin, at, end
    cdef int64_t char, step, i, index, o = 0, count
    cdef const uint8_t* b = &buf[0] if buf.shape[0] else NULL
    cdef bint user_defined, single
    cdef uint64_t h
    cdef double score
    for k in range(n):
        longest = max(longest, starts[k + 1] - starts[k])
    gaps_a = np.empty(n, dtype=np.float64)
    flat_a = np.empty(starts[n] - starts[0], dtype=np.int32)  # a piece holds a byte at least
    lengths_a = np.zeros(n, dtype=np.int64)
    unknown_a = np.zeros(n, dtype=np.bool_)
    best_a = np.empty(longest + 1, dtype=np.float64)
    second_a = np.empty(longest + 1, dtype=np.float64)
    came_from_a = np.empty(longest + 1, dtype=np.int64)
    came_by_a = np.empty(longest + 1, dtype=np.int32)
    cdef double[::1] out = gaps_a, best_v = best_a, second_v = second_a
    cdef int32_t[::1] flat = flat_a, came_by_v = came_by_a
    cdef int64_t[::1] lengths = lengths_a, came_from_v = came_from_a
    cdef uint8_t[::1] unknown = _bools(unknown_a)
    cdef double* best = &best_v[0]
    cdef double* second = &second_v[0]
    cdef int64_t* came_from = &came_from_v[0]
    cdef int32_t* came_by = &came_by_v[0]
    with nogil:
        for k in range(n):
            first, stop = starts[k], starts[k + 1]
            size = stop - first
            for i in range(size + 1):
                best[i] = -INFINITY
                second[i] = -INFINITY
            best[0] = 0.0
            user_defined = False
            begin = first
            while begin < stop:
                at = begin - first
                char = _char_length(b[begin], stop - begin)
                single = False
                h = FNV_OFFSET
                end = begin
                while end < stop:
                    step = _char_length(b[end], stop - end)
                    h = _extended(h, b, end, end + step)
                    end += step
                    index = _lookup(b, begin, end, h, table)
                    if index < 0:
                        break
                    if kinds[index] == PREFIX:
                        continue
                    if kinds[index] == USER_DEFINED:
                        user_defined = True
                    score = <double>scores[index]
                    _arrive(best, second, came_from, came_by, end - first, at, piece_ids[index],
                            best[at] + score, second[at] + score)
                    single = single or end - begin == char
                if not single:
                    score = <double>unk_score
                    _arrive(best, second, came_from, came_by, at + char, at, -1,
                            best[at] + score, second[at] + score)
                begin += char
            if user_defined:
                out[k] = -INFINITY
            elif second[size] == -INFINITY:
                out[k] = INFINITY
            else:
                out[k] = best[size] - second[size]
            # The best cut, read back from the end and written front to back.
            count = 0
            at = size
            while at > 0:
                count += 1
                unknown[k] = unknown[k] or came_by[at] < 0
                at = came_from[at]
            if unknown[k]:
                continue
            lengths[k] = count
            at = size
            for i in range(o + count - 1, o - 1, -1):
                flat[i] = came_by[at]
                at = came_from[at]
            o += count
    return flat_a[:o], lengths_a, gaps_a, unknown_a


# --- code points to model text (psp.model.text) -------------------------------------------------


cdef inline bint _sorted_has(const int64_t* values, int64_t n, int64_t value) noexcept nogil:
    """Whether sorted ``values`` hold ``value`` (a binary search)."""
    cdef int64_t low = 0, high = n, middle
    while low < high:
        middle = (low + high) // 2
        if values[middle] < value:
            low = middle + 1
        else:
            high = middle
    return low < n and values[low] == value


def map_texts(
    const uint8_t[::1] buf, const int64_t[::1] text_starts,
    const int64_t[::1] starts, const uint8_t[::1] chars, contextual_array,
    int64_t growth, const int64_t[::1] changed_above, bint lowercase,
):
    """The mapped bytes of each text of ``buf``, their starts, and the texts to leave to
    ``model_text`` (see :func:`psp.model.text.model_utf8`)."""
    cdef const uint8_t[::1] contextual = _bools(contextual_array)
    cdef int64_t n = text_starts.shape[0] - 1, limit = starts.shape[0] - 1
    cdef int64_t n_changed = changed_above.shape[0]
    cdef const int64_t* changed = &changed_above[0] if n_changed else NULL
    result = np.empty(buf.shape[0] * growth + 1, dtype=np.uint8)
    starts_a = np.empty(n + 1, dtype=np.int64)
    unmapped_a = np.zeros(n, dtype=np.bool_)
    cdef uint8_t[::1] out = result
    cdef int64_t[::1] out_starts = starts_a
    cdef uint8_t[::1] unmapped = _bools(unmapped_a)
    cdef int64_t o = 0, k, i, stop, j, cp, size
    cdef uint8_t b
    with nogil:
        for k in range(n):
            out_starts[k] = o
            i, stop = text_starts[k], text_starts[k + 1]
            while i < stop:
                b = buf[i]
                if b < 0x80:
                    out[o] = b + 32 if lowercase and 65 <= b <= 90 else b
                    o += 1
                    i += 1
                    continue
                if b < 0xE0:
                    cp = ((b & 0x1F) << 6) | (buf[i + 1] & 0x3F)
                    size = 2
                elif b < 0xF0:
                    cp = ((b & 0x0F) << 12) | ((buf[i + 1] & 0x3F) << 6) | (buf[i + 2] & 0x3F)
                    size = 3
                else:
                    cp = ((b & 0x07) << 18) | ((buf[i + 1] & 0x3F) << 12)
                    cp |= ((buf[i + 2] & 0x3F) << 6) | (buf[i + 3] & 0x3F)
                    size = 4
                if cp < limit:
                    unmapped[k] |= contextual[cp]
                    for j in range(starts[cp], starts[cp + 1]):
                        out[o] = chars[j]
                        o += 1
                else:
                    unmapped[k] |= _sorted_has(changed, n_changed, cp)
                    for j in range(size):
                        out[o] = buf[i + j]
                        o += 1
                i += size
        out_starts[n] = o
    return result[:o], starts_a, unmapped_a


# --- piece ids (psp.model.piece_encoder) --------------------------------------------------------


def flatten(
    const int32_t[::1] flat, const int64_t[::1] lengths,
    int64_t unk_id, int64_t boundary_id, int64_t max_pieces,
):
    """SentencePiece's ids (flat, with each sentence's length) as the encoder's flat ids and
    offsets: ``unk_id`` dropped, at most ``max_pieces`` kept (``-1``: all), ``[unk_id]`` for a
    sentence left with none; a sentence of only ``unk_id`` and ``boundary_id`` loses them all."""
    cdef int64_t n = lengths.shape[0], begin = 0, k, i, kept, o, stop
    cdef bint unknown, has_text
    offsets_a = np.zeros(n + 1, dtype=np.int64)
    textless_a = np.zeros(n, dtype=np.uint8)
    cdef int64_t[::1] offsets = offsets_a
    cdef uint8_t[::1] textless = textless_a
    with nogil:
        for k in range(n):
            kept = 0
            unknown = has_text = False
            for i in range(begin, begin + lengths[k]):
                if flat[i] == unk_id:
                    unknown = True
                else:
                    kept += 1
                    has_text = has_text or flat[i] != boundary_id
            if unknown and not has_text:
                textless[k] = True
                kept = 0
            if 0 <= max_pieces < kept:
                kept = max_pieces
            offsets[k + 1] = offsets[k] + (kept if kept > 1 else 1)
            begin += lengths[k]
    result = np.full(offsets[n], unk_id, dtype=np.int32)
    cdef int32_t[::1] out = result
    with nogil:
        begin = 0
        for k in range(n):
            o, stop = offsets[k], offsets[k + 1]
            if not textless[k]:
                for i in range(begin, begin + lengths[k]):
                    if o == stop:
                        break
                    if flat[i] != unk_id:
                        out[o] = flat[i]
                        o += 1
            begin += lengths[k]
    return result, offsets_a


# --- sentence vectors (psp.model.pooling) -------------------------------------------------------


include "_pool.pxi"


cdef extern from *:
    """
    #if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    static int psp_cpu_has_avx2(void) { __builtin_cpu_init(); return __builtin_cpu_supports("avx2"); }
    #else
    static int psp_cpu_has_avx2(void) { return 0; }
    #endif
    """
    int psp_cpu_has_avx2()


def cpu_has_avx2():
    """Whether this CPU runs AVX2 (``psp.model._loops_avx2``, the pooling loop built for it)."""
    return bool(psp_cpu_has_avx2())


def half_bits(const uint32_t[::1] bits, const float[::1] values, uint16_t[::1] out):
    """float16 bits of float32 ``values`` (``bits``: the same memory as uint32), rounded to
    nearest even as numpy's cast rounds; NaN becomes the quiet NaN."""
    cdef int64_t i
    cdef uint32_t u, a
    cdef uint16_t sign, h
    with nogil:
        for i in range(bits.shape[0]):
            u = bits[i]
            sign = <uint16_t>((u >> 16) & 0x8000)
            a = u & 0x7FFFFFFF
            if a >= 0x47800000:  # 65536 and over: infinity, or NaN
                h = 0x7E00 if a > 0x7F800000 else 0x7C00
            elif a < 0x38800000:  # under 2**-14: a subnormal half (2**-24 steps), or zero
                h = <uint16_t>rint(fabs(<double>values[i]) * 16777216.0)
            else:  # rebias the exponent, round the 13 dropped bits to nearest even
                h = <uint16_t>((a + HALF_REBIAS + ((a >> 13) & 1)) >> 13)
            out[i] = h | sign
