"""Compiled open-addressing hash tables of byte strings: the word cache's table of words
(:mod:`psp.model.word_pieces`) and the piece lattice's table of piece prefixes
(:mod:`psp.model.unigram_ties`).

A table is four arrays: ``slots`` (a power of two of them, each an item's index or -1), each
item's FNV-1a hash, and the items' bytes back to back (``arena[arena_starts[k]:arena_starts[k +
1]]``). The hash is built one byte at a time (:data:`FNV_OFFSET`, then ``(h ^ byte) *
FNV_PRIME``), so a caller extending a string byte by byte has the hash of every prefix on the
way.
"""

from __future__ import annotations

import numba
import numpy as np

JIT = {"nogil": True, "cache": True, "error_model": "numpy"}
FNV_OFFSET, FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


@numba.njit(**JIT)
def _same(buf, begin, end, arena, arena_begin, arena_end):
    if end - begin != arena_end - arena_begin:
        return False
    for j in range(end - begin):
        if buf[begin + j] != arena[arena_begin + j]:
            return False
    return True


@numba.njit(**JIT)
def find(buf, begin, end, h, slots, hashes, arena, arena_starts):
    """The index of the item ``buf[begin:end]`` of hash ``h`` (the bytes compared), or -1.

    A slot may hold an item added after the caller took its arrays (the word cache fills its
    slots in place): its index is past ``hashes``, and the search goes on past it as past any
    other item.
    """
    mask = np.uint64(slots.shape[0] - 1)
    slot = h & mask
    items = hashes.shape[0]
    while slots[slot] >= 0:
        k = slots[slot]
        if (
            k < items
            and hashes[k] == h
            and _same(buf, begin, end, arena, arena_starts[k], arena_starts[k + 1])
        ):
            return k
        slot = (slot + np.uint64(1)) & mask
    return -1


@numba.njit(**JIT)
def place(slots, hashes, first, last):
    """Put items ``first:last`` (their hashes known) into free slots."""
    mask = np.uint64(slots.shape[0] - 1)
    for k in range(first, last):
        slot = hashes[k] & mask
        while slots[slot] >= 0:
            slot = (slot + np.uint64(1)) & mask
        slots[slot] = k


@numba.njit(**JIT)
def hash_items(arena, arena_starts):
    """Each item's FNV-1a hash."""
    hashes = np.empty(arena_starts.shape[0] - 1, dtype=np.uint64)
    for k in range(hashes.shape[0]):
        h = FNV_OFFSET
        for i in range(arena_starts[k], arena_starts[k + 1]):
            h = (h ^ np.uint64(arena[i])) * FNV_PRIME
        hashes[k] = h
    return hashes


def empty_slots(items: int) -> np.ndarray:
    """``int32`` slots for ``items`` items, at most half of them full."""
    return np.full(1 << (2 * items).bit_length(), -1, dtype=np.int32)


def joined(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``items`` back to back as one ``uint8`` array, and where each begins (``int64``, one
    more than the items: item ``k`` is ``buf[starts[k]:starts[k + 1]]``)."""
    starts = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, items), np.int64, len(items)), out=starts[1:])
    return np.frombuffer(b"".join(items), dtype=np.uint8), starts
