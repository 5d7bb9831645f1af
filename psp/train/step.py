"""One minibatch update on the few thousand table rows the minibatch uses.

The step pools the minibatch's sentences straight from the table, back-propagates the
objective's loss (:mod:`psp.train.losses`) to the pooled embeddings only, turns that into the
gradient of the rows used (:func:`psp.train.ops.row_gradients`, one pass) and hands
``(rows, grad)`` to a row-sparse Adam (:mod:`psp.train.optim`), which updates the rows and their
moments where they live. With dropout the rows are gathered first and autograd reaches them
through the dropped-out tokens; token dropout only thins the sentences' piece ids before
pooling (:func:`psp.train.ops.drop_tokens`), so it keeps the compiled path.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields

import torch

from psp.train.bags import Bags
from psp.train.config import TrainConfig
from psp.train.losses import loss_for
from psp.train.negatives import MinedMegabatch, mine_negatives
from psp.train.ops import drop_tokens, embed_bags, pool, row_gradients
from psp.train.optim import DenseAdam, LazyAdam


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
class PhaseTimes:
    """Seconds a trainer spent per phase, disjoint: waiting for data, embedding and mining
    mega-batches, minibatch steps (pool, loss, backward, clipping) and their optimizer
    updates."""

    data: float = 0.0
    mine: float = 0.0
    steps: float = 0.0
    update: float = 0.0

    def add(self, other: PhaseTimes) -> None:
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def since(self, earlier: PhaseTimes) -> dict[str, float]:
        """Seconds per phase since ``earlier`` (a copy of these times taken then)."""
        return {f.name: getattr(self, f.name) - getattr(earlier, f.name) for f in fields(self)}

    def to_dict(self) -> dict[str, float]:
        return {field.name: getattr(self, field.name) for field in fields(self)}


def train_step(
    table: torch.Tensor,
    optimizer: LazyAdam | DenseAdam,
    batch: MinedMegabatch,
    *,
    pairs: torch.Tensor,
    cfg: TrainConfig,
    generator: torch.Generator | None = None,
    step: int | None = None,
    times: PhaseTimes | None = None,
) -> float:
    """One minibatch update on mega-batch ``pairs`` under ``cfg.loss``; returns the loss.

    Only the unique rows used by the minibatch (its pairs, and their mined negatives for the
    margin loss) get a gradient, coalesced, ``(rows, dim)``; clipping on it sees the same norm
    a dense gradient would have. ``step`` numbers the update for Adam's bias correction
    (default: the optimizer's own count); ``times`` adds the update's seconds to ``update``.
    """
    objective = loss_for(cfg)
    sentences = objective.sentences(batch, pairs)
    if cfg.token_dropout > 0:
        sentences = drop_tokens(sentences, cfg.token_dropout, generator)
    rows, local = unique_rows(sentences.ids, len(table))
    if cfg.dropout > 0:
        block = table.index_select(0, rows).requires_grad_()
        emb = pool(block, Bags(local, sentences.offsets), cfg.dropout, generator)
        loss = objective(emb, len(pairs))
        loss.backward()
        grad = block.grad
    else:
        emb = pool(table, sentences).requires_grad_()
        loss = objective(emb, len(pairs))
        loss.backward()
        grad = row_gradients(emb.grad, local, sentences, len(rows))
    scale = 1.0  # a tensor on the device when clipping: reading it would wait for the GPU
    if cfg.grad_clip is not None:
        norm = torch.linalg.vector_norm(grad)
        scale = torch.clamp(cfg.grad_clip / (norm + 1e-6), max=1.0)
    start = time.perf_counter()
    optimizer.step(rows, grad, grad_scale=scale, step=step)
    if times is not None:
        times.update += time.perf_counter() - start
    return float(loss.detach())


def train_megabatch(
    table: torch.Tensor,
    optimizer: LazyAdam | DenseAdam,
    src: Bags,
    tgt: Bags,
    *,
    cfg: TrainConfig,
    first_step: int,
    generator: torch.Generator | None,
    times: PhaseTimes,
    on_step: Callable[[float, int], None],
) -> None:
    """One mega-batch: its hardest negatives mined with the parameters at its start (for an
    objective that mines), then its minibatch steps, numbered from ``first_step + 1``;
    ``on_step(loss, pairs)`` after each. The sequential trainer and every parallel worker
    train through this one function."""
    start = time.perf_counter()
    batch = MinedMegabatch(src, tgt)
    if loss_for(cfg).mines_negatives:
        batch.neg_tgt, batch.neg_src = mine_negatives(
            embed_bags(table, src), embed_bags(table, tgt), cfg.mine_block
        )
    mined = time.perf_counter()
    times.mine += mined - start
    updates = times.update
    with torch_threads(cfg.step_threads if table.device.type == "cpu" else None):
        for k, lo in enumerate(range(0, len(src), cfg.batch_size)):
            pairs = torch.arange(lo, min(len(src), lo + cfg.batch_size), device=table.device)
            loss = train_step(
                table,
                optimizer,
                batch,
                pairs=pairs,
                cfg=cfg,
                generator=generator,
                step=first_step + k + 1,
                times=times,
            )
            on_step(loss, len(pairs))
    times.steps += time.perf_counter() - mined - (times.update - updates)
