"""The model's two differentiable pieces, mean pooling and the margin loss, with hand-written
backward passes (fewer, larger kernels than autograd's on the CPU).

:func:`pool` is training's pooling; inference pools with :func:`psp.model.pooling.mean_pool`.
Without dropout the two give the same bits for every sentence with a known piece
(``tests/test_train_ops.py``); only inference zeroes a sentence with none. The backward of mean
pooling is :func:`row_gradients`: the step pools straight from the table and hands the pooled
rows' gradient to the optimizer, so no autograd graph reaches the table.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from psp.train.bags import Bags


def pool(
    table: torch.Tensor,
    bags: Bags,
    dropout: float = 0.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Mean of the rows of ``table`` for each bag; dropout (if any) on the piece embeddings.

    Without dropout this is ``embedding_bag(mode="mean")``, which reads only the rows the bags
    use. With dropout it is written with ``index_add_``, so autograd reaches ``table`` (the
    step then passes the gathered rows of the minibatch, not the whole table).
    """
    if dropout <= 0:
        return F.embedding_bag(bags.ids, table, bags.offsets[:-1], mode="mean")
    tokens = table[bags.ids]
    keep = torch.rand(tokens.shape, generator=generator, device=tokens.device) >= dropout
    tokens = tokens * keep / (1 - dropout)
    sums = torch.zeros(len(bags), table.shape[1], device=tokens.device, dtype=tokens.dtype)
    return sums.index_add_(0, bags.segment(), tokens) / bags.lengths().unsqueeze(1)


def drop_tokens(bags: Bags, share: float, generator: torch.Generator | None) -> Bags:
    """``bags`` with each piece left out with probability ``share``; a sentence the draw would
    empty keeps all its pieces (an empty bag has no mean to train).

    Word dropout as in deep averaging networks: a mean of fewer pieces is a noisier view of the
    sentence, so the table cannot lean on one frequent piece to match a pair. It only filters
    the ids, so the step pools and back-propagates on its compiled path, unlike ``dropout``.
    """
    segment = bags.segment()
    keep = torch.rand(len(bags.ids), generator=generator, device=bags.ids.device) >= share
    kept = torch.bincount(segment[keep], minlength=len(bags))
    emptied = kept == 0
    keep |= emptied[segment]
    offsets = torch.zeros_like(bags.offsets)
    torch.cumsum(torch.where(emptied, bags.lengths(), kept), 0, out=offsets[1:])
    return Bags(bags.ids[keep], offsets)


def row_gradients(grad: torch.Tensor, local: torch.Tensor, bags: Bags, n_rows: int) -> torch.Tensor:
    """The gradient of :func:`pool` (no dropout) on the rows it pooled: ``(n_rows, dim)``.

    ``bags`` are the pooled sentences, ``local[t]`` the row (in ``[0, n_rows)``) of their
    token ``t`` and ``grad`` the ``(n_bags, dim)`` gradient of their means. Row ``r`` gets,
    for each token using it, that token's bag gradient divided by the bag's length. On the CPU
    that is one pass of :func:`psp.train.kernels.row_gradients`, writing each row once; on
    another device :func:`sorted_row_gradients`, a sum pooling of the scaled bag gradients
    with the tokens grouped by row (one stable sort): the same sums in the same order.
    """
    if grad.device.type == "cpu":
        from psp.train.kernels import row_gradients as cpu_row_gradients

        return cpu_row_gradients(grad, local, bags.offsets, n_rows)
    return sorted_row_gradients(grad, local, bags, n_rows)


def sorted_row_gradients(
    grad: torch.Tensor, local: torch.Tensor, bags: Bags, n_rows: int
) -> torch.Tensor:
    """:func:`row_gradients` with torch ops, for any device."""
    lengths = bags.lengths()
    bag = bags.segment()
    order = torch.argsort(local, stable=True)
    starts = torch.zeros(n_rows, dtype=torch.int64, device=grad.device)
    torch.cumsum(torch.bincount(local, minlength=n_rows)[:-1], 0, out=starts[1:])
    per_bag = grad / lengths.clamp(min=1).to(grad.dtype).unsqueeze(1)
    return F.embedding_bag(bag[order], per_bag, starts, mode="sum")


@torch.no_grad()
def embed_bags(table: torch.Tensor, bags: Bags, chunk: int = 8192) -> torch.Tensor:
    """L2-normalized embeddings of all bags (no gradient, no dropout), in chunks."""
    out = torch.empty(len(bags), table.shape[1], dtype=table.dtype, device=table.device)
    for lo in range(0, len(bags), chunk):
        part = bags.slice(lo, min(lo + chunk, len(bags)))
        out[lo : lo + len(part)] = F.normalize(pool(table, part), dim=1)
    return out


def margin_loss(
    s: torch.Tensor, t: torch.Tensor, t_neg: torch.Tensor, s_neg: torch.Tensor, *, margin: float
) -> torch.Tensor:
    """Mean over pairs of ``[δ - cos(s,t) + cos(s,t')]+ + [δ - cos(s,t) + cos(t,s')]+``."""
    return _MarginLoss.apply(s, t, t_neg, s_neg, margin)


def _cosine(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``cos(a_i, b_i)`` and the two gradients ``d cos / d a``, ``d cos / d b`` (rows)."""
    a_norm = a.norm(dim=1, keepdim=True).clamp(min=1e-8)  # as in F.cosine_similarity
    b_norm = b.norm(dim=1, keepdim=True).clamp(min=1e-8)
    a_unit, b_unit = a / a_norm, b / b_norm
    cos = (a_unit * b_unit).sum(dim=1, keepdim=True)
    return cos, (b_unit - cos * a_unit) / a_norm, (a_unit - cos * b_unit) / b_norm


class _MarginLoss(torch.autograd.Function):
    """:func:`margin_loss` with its gradient written out.

    Autograd through three ``cosine_similarity`` calls runs some forty small elementwise
    kernels per step; the closed form (``d cos(a,b)/da = (b̂ - cos(a,b) â) / |a|``, hinge
    weights ``1[h > 0] / n``) needs half as many and took the loss from ~6 to ~3.5 ms of
    CPU per step (128 pairs, dim 1024). The three cosines stay separate on purpose: batched
    into one ``(3n, dim)`` computation they were slower, the operands no longer fitting the
    per-core cache.
    """

    @staticmethod
    def forward(ctx, s, t, t_neg, s_neg, margin: float):
        pos, d_s, d_t = _cosine(s, t)
        neg_t, d_s_by_t_neg, d_t_neg = _cosine(s, t_neg)
        neg_s, d_t_by_s_neg, d_s_neg = _cosine(t, s_neg)
        hinge_t = margin - pos + neg_t
        hinge_s = margin - pos + neg_s
        loss = (hinge_t.clamp(min=0) + hinge_s.clamp(min=0)).mean()
        if any(ctx.needs_input_grad):
            w_t = (hinge_t > 0).to(s.dtype) / len(s)
            w_s = (hinge_s > 0).to(s.dtype) / len(s)
            ctx.save_for_backward(
                w_t * d_s_by_t_neg - (w_t + w_s) * d_s,
                w_s * d_t_by_s_neg - (w_t + w_s) * d_t,
                w_t * d_t_neg,
                w_s * d_s_neg,
            )
        return loss

    @staticmethod
    def backward(ctx, grad):
        return (*(grad * g for g in ctx.saved_tensors), None)
