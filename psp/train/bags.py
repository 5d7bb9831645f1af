"""Sentences as flat piece ids plus offsets, the layout ``embedding_bag`` pools."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Bags:
    """Sentences as flat piece ids + offsets (``n + 1``), both ``int64`` tensors."""

    ids: torch.Tensor
    offsets: torch.Tensor

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> torch.Tensor:
        """Pieces per sentence."""
        return self.offsets[1:] - self.offsets[:-1]

    def segment(self) -> torch.Tensor:
        """The sentence of each piece (``ids``' length), what ``index_add_`` and ``bincount``
        group by."""
        return torch.repeat_interleave(
            torch.arange(len(self), device=self.ids.device), self.lengths()
        )

    def select(self, index: torch.Tensor) -> Bags:
        """The sentences ``index`` (any order, repeats allowed), without a Python loop."""
        starts = self.offsets[index]
        lengths = self.offsets[index + 1] - starts
        offsets = torch.zeros(len(index) + 1, dtype=torch.int64, device=self.ids.device)
        torch.cumsum(lengths, 0, out=offsets[1:])
        shift = torch.repeat_interleave(starts - offsets[:-1], lengths)
        positions = torch.arange(int(offsets[-1]), device=self.ids.device) + shift
        return Bags(self.ids[positions], offsets)

    def slice(self, lo: int, hi: int) -> Bags:
        """Sentences ``lo:hi`` as views (no gather)."""
        offsets = self.offsets[lo : hi + 1]
        return Bags(self.ids[int(offsets[0]) : int(offsets[-1])], offsets - offsets[0])

    def to(self, device: str | torch.device) -> Bags:
        return Bags(self.ids.to(device), self.offsets.to(device))


def concat_bags(parts: list[Bags]) -> Bags:
    ids = torch.cat([p.ids for p in parts])
    shifts = np.cumsum([0] + [len(p.ids) for p in parts[:-1]])
    offsets = torch.cat(
        [parts[0].offsets[:1]] + [p.offsets[1:] + int(s) for p, s in zip(parts, shifts)]
    )
    return Bags(ids, offsets)


def truncated_bags(ids: np.ndarray, offsets: np.ndarray, max_pieces: int | None) -> Bags:
    """Bags of ``(ids, offsets)`` read from the file, each cut to ``max_pieces`` pieces."""
    ids = torch.from_numpy(np.asarray(ids, dtype=np.int64))
    offsets = torch.from_numpy(np.asarray(offsets, dtype=np.int64))
    bags = Bags(ids, offsets)
    if max_pieces is None or len(bags) == 0:
        return bags
    lengths = offsets[1:] - offsets[:-1]
    if int(lengths.max()) <= max_pieces:
        return bags
    keep = torch.arange(len(ids)) - torch.repeat_interleave(offsets[:-1], lengths)
    new_lengths = lengths.clamp(max=max_pieces)
    new_offsets = torch.zeros_like(offsets)
    torch.cumsum(new_lengths, 0, out=new_offsets[1:])
    return Bags(ids[keep < max_pieces], new_offsets)
