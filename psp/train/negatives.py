"""Hardest in-mega-batch negatives: one blocked similarity matmul per mega-batch, and the
mega-batch that carries them to the objectives (:class:`MinedMegabatch`).

It is most of a mega-batch's time (``2 n² dim`` flops, n = 12,800 pairs at M = 100). On CPUs
with bfloat16 dot-product instructions (AVX512-BF16, AMX) the product runs in bfloat16 at
about 4.5x the float32 rate, and the few entries within its error of each row's and column's
maximum are re-scored in float32 (:func:`psp.train.kernels.hardest_negatives_bfloat16`): the
negatives are the float32 product's, up to ties at float32 precision, 3x sooner per mega-batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from psp.train.bags import Bags

Precision = Literal["auto", "float32", "bfloat16"]


@dataclass
class MinedMegabatch:
    """A mega-batch's pairs and, for each pair, the row of its hardest negative on each side
    (``None`` for an objective that mines none)."""

    src: Bags
    tgt: Bags
    neg_tgt: torch.Tensor | None = None
    neg_src: torch.Tensor | None = None


def bfloat16_is_fast(device: torch.device) -> bool:
    """Whether the CPU multiplies bfloat16 matrices natively (else its bfloat16 product is an
    emulation, slower than float32)."""
    return device.type == "cpu" and (
        torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    )


@torch.no_grad()
def mine_negatives(
    src: torch.Tensor, tgt: torch.Tensor, block: int = 1024, precision: Precision = "auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hardest in-mega-batch negatives from one similarity matrix, own partner masked.

    Args:
        src, tgt: ``(n, dim)`` L2-normalized embeddings, row ``i`` of each forming pair ``i``
            (``n >= 2``).
        block: rows of ``src @ tgt.T`` held at once (memory ``block * n`` floats).
        precision: of the product; ``auto`` takes bfloat16 where :func:`bfloat16_is_fast`
            (CPU only), else float32. Both give the same negatives.

    Returns:
        ``(neg_tgt, neg_src)``: ``neg_tgt[i] = argmax_{j != i} cos(src_i, tgt_j)`` and
        ``neg_src[j] = argmax_{i != j} cos(tgt_j, src_i)`` (ties: the lowest index).

    The matmul is the cost (2 n² dim flops); around it, one buffer is reused for every block
    (no page faults on a fresh 50 MB each time) and the column argmax, a slow strided
    reduction, is only taken for the columns whose best value this block improves: after
    the first block that is a small, shrinking fraction (``amax`` finds them cheaply).
    """
    n = len(src)
    if n < 2:
        raise ValueError("mining negatives needs at least two pairs")
    if precision == "auto":
        precision = "bfloat16" if bfloat16_is_fast(src.device) else "float32"
    if precision == "bfloat16":
        if src.device.type != "cpu":
            raise ValueError("bfloat16 mining is a CPU kernel; on other devices use float32")
        from psp.train.kernels import hardest_negatives_bfloat16

        return hardest_negatives_bfloat16(src, tgt, block)
    neg_tgt = torch.empty(n, dtype=torch.int64, device=src.device)
    buffer = torch.empty(min(block, n), n, dtype=src.dtype, device=src.device)
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        sims = torch.mm(src[lo:hi], tgt.T, out=buffer[: hi - lo])
        sims.diagonal(offset=lo).fill_(-math.inf)
        torch.argmax(sims, dim=1, out=neg_tgt[lo:hi])
        if lo == 0:  # every column improves on nothing
            best_src, neg_src = sims.max(dim=0)
            continue
        value = sims.amax(dim=0)
        better = torch.nonzero(value > best_src).squeeze(1)
        best_src[better] = value[better]
        neg_src[better] = sims.index_select(1, better).argmax(dim=0) + lo
    return neg_tgt, neg_src
