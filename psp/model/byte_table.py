"""Open-addressing hash tables of byte strings: the word cache's table of words
(:mod:`psp.model.word_pieces`) and the piece lattice's table of piece prefixes
(:mod:`psp.model.unigram_ties`). Their loops (hashing, placing, finding an item) are compiled, in
:mod:`psp.model._loops`.

A table is four arrays: ``slots`` (a power of two of them, each an item's index or -1), each
item's FNV-1a hash, and the items' bytes back to back (``arena[arena_starts[k]:arena_starts[k +
1]]``). The hash is built one byte at a time (``h = (h ^ byte) * FNV_PRIME`` from
``FNV_OFFSET``), so a caller extending a string byte by byte has the hash of every prefix on the
way.
"""

from __future__ import annotations

import numpy as np

from psp.model._loops import place

__all__ = ["empty_slots", "joined", "place"]


def empty_slots(items: int) -> np.ndarray:
    """``int32`` slots for ``items`` items, at most half of them full."""
    return np.full(1 << (2 * items).bit_length(), -1, dtype=np.int32)


def joined(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``items`` back to back as one ``uint8`` array, and where each begins (``int64``, one
    more than the items: item ``k`` is ``buf[starts[k]:starts[k + 1]]``)."""
    starts = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, items), np.int64, len(items)), out=starts[1:])
    return np.frombuffer(b"".join(items), dtype=np.uint8), starts
