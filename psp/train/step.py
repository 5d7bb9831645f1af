"""One minibatch update on the few thousand table rows the minibatch uses.

The gradient of a minibatch lives on those rows, so the step gathers them once
(``index_select``), pools them, back-propagates the objective's loss (:mod:`psp.train.losses`)
into that small block and hands ``(rows, grad)`` and the gathered rows to a row-sparse Adam
(:mod:`psp.optim`), which updates them in one fused pass and writes them back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from psp.optim import DenseAdam, LazyAdam
from psp.train.bags import Bags
from psp.train.config import TrainConfig
from psp.train.losses import loss_for
from psp.train.ops import pool


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch threads (``None``: unchanged), restoring them after."""
    previous = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def unique_rows(ids: torch.Tensor, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.unique(ids, return_inverse=True)`` for ids in ``[0, vocab)``, without a sort:
    a presence mask over the vocabulary and a lookup table, linear in ``vocab + len(ids)``."""
    present = torch.zeros(vocab, dtype=torch.bool, device=ids.device)
    present[ids] = True
    rows = torch.nonzero(present).squeeze(1)
    lookup = torch.empty(vocab, dtype=torch.int64, device=ids.device)
    lookup[rows] = torch.arange(len(rows), device=ids.device)
    return rows, lookup[ids]


@dataclass
class MinedMegabatch:
    """A mega-batch's pairs and, for each pair, the row of its hardest negative on each side
    (``None`` for an objective that mines none)."""

    src: Bags
    tgt: Bags
    neg_tgt: torch.Tensor | None = None
    neg_src: torch.Tensor | None = None


def train_step(
    table: torch.Tensor,
    optimizer: LazyAdam | DenseAdam,
    batch: MinedMegabatch,
    *,
    pairs: torch.Tensor,
    cfg: TrainConfig,
    generator: torch.Generator | None = None,
) -> float:
    """One minibatch update on mega-batch ``pairs`` under ``cfg.loss``; returns the loss.

    Only the unique rows used by the minibatch (its pairs, and their mined negatives for the
    margin loss) take part in autograd, so the gradient comes out coalesced, ``(rows, dim)``;
    clipping on it sees the same norm a dense gradient would have.
    """
    objective = loss_for(cfg)
    sentences = objective.sentences(batch, pairs)
    rows, local = unique_rows(sentences.ids, len(table))
    block = table.index_select(0, rows).requires_grad_()
    emb = pool(block, Bags(local, sentences.offsets), cfg.dropout, generator)
    loss = objective(emb, len(pairs))
    loss.backward()
    grad = block.grad
    if cfg.grad_clip is not None:
        norm = torch.linalg.vector_norm(grad)
        grad.mul_(torch.clamp(cfg.grad_clip / (norm + 1e-6), max=1.0))
    optimizer.step(rows, grad, values=block.detach())
    return float(loss.detach())
