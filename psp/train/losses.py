"""The training objectives a minibatch step can take (``train.loss``), behind one interface.

An objective says whether it needs the mega-batch's hardest negatives mined
(``mines_negatives``), which sentences of the mega-batch a minibatch pools (``sentences``) and
the loss of their pooled embeddings (``__call__``); :func:`psp.train.step.train_step` does the
rest (gather, pool, backward, clip, sparse update) the same way for every objective.

- :class:`MarginLoss`: P-SP's (Wieting et al.), each sentence against its hardest negative of
  the mega-batch under a margin (:func:`psp.train.ops.margin_loss`).
- :class:`PairWeightingLoss`: the multi-similarity loss (Wang et al., CVPR 2019) of SentPWNet,
  every informative pair of the minibatch weighted by how badly it is placed
  (:func:`pair_weighting_loss`). It mines nothing from the mega-batch, which is then only the
  unit in which pairs are read: the data order is the same for both objectives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from psp.train.bags import Bags, concat_bags
from psp.train.negatives import MinedMegabatch
from psp.train.ops import margin_loss

if TYPE_CHECKING:
    from psp.train.config import TrainConfig


@dataclass(frozen=True)
class MarginLoss:
    """``[δ - cos(s,t) + cos(s,t')]+ + [δ - cos(s,t) + cos(t,s')]+`` with ``t'`` (``s'``) the
    mega-batch's hardest negative of ``s`` (``t``)."""

    margin: float
    mines_negatives = True

    def sentences(self, batch: MinedMegabatch, pairs: torch.Tensor) -> Bags:
        """Sources, their negatives' sources, targets, their negatives' targets."""
        sources = batch.src.select(torch.cat([pairs, batch.neg_src[pairs]]))
        targets = batch.tgt.select(torch.cat([pairs, batch.neg_tgt[pairs]]))
        return concat_bags([sources, targets])

    def __call__(self, emb: torch.Tensor, n_pairs: int) -> torch.Tensor:
        s, s_neg, t, t_neg = emb.split(n_pairs)
        return margin_loss(s, t, t_neg, s_neg, margin=self.margin)


@dataclass(frozen=True, kw_only=True)
class PairWeightingLoss:
    """:func:`pair_weighting_loss` over the minibatch's own sentences (no mined negatives)."""

    alpha: float
    beta: float
    lam: float
    epsilon: float
    negatives: str
    mines_negatives = False

    def sentences(self, batch: MinedMegabatch, pairs: torch.Tensor) -> Bags:
        """The minibatch's sources, then its targets."""
        return concat_bags([batch.src.select(pairs), batch.tgt.select(pairs)])

    def __call__(self, emb: torch.Tensor, n_pairs: int) -> torch.Tensor:
        s, t = emb.split(n_pairs)
        return pair_weighting_loss(
            s,
            t,
            alpha=self.alpha,
            beta=self.beta,
            lam=self.lam,
            epsilon=self.epsilon,
            negatives=self.negatives,
        )


def loss_for(cfg: TrainConfig) -> MarginLoss | PairWeightingLoss:
    """The objective ``cfg.loss`` names, with its hyperparameters."""
    if cfg.loss == "margin":
        return MarginLoss(cfg.margin)
    return PairWeightingLoss(
        alpha=cfg.pw_alpha,
        beta=cfg.pw_beta,
        lam=cfg.pw_lambda,
        epsilon=cfg.pw_epsilon,
        negatives=cfg.pw_negatives,
    )


def pair_weighting_loss(
    s: torch.Tensor,
    t: torch.Tensor,
    *,
    alpha: float,
    beta: float,
    lam: float,
    epsilon: float,
    negatives: str = "both",
) -> torch.Tensor:
    """Multi-similarity loss of a minibatch of pairs ``(s_i, t_i)``, with pair mining.

    Every sentence of either side is an anchor ``i`` (``m = 2n`` of them); its one positive is
    its partner, its negatives every other sentence of the minibatch (``negatives="both"``) or
    the other side's only (``"other_side"``). With ``S`` the cosines, pair mining keeps a
    negative ``j`` when ``S_ij + ε > S_ip`` (it comes within ε of the positive) and the
    positive when ``S_ip - ε < max_j S_ij`` (within ε of the hardest negative); then

        L = 1/m Σ_i [ 1/α log(1 + Σ_kept-pos e^{-α (S_ip - λ)})
                    + 1/β log(1 + Σ_kept-neg e^{β (S_ij - λ)}) ].

    A minibatch whose every positive beats its hardest negative by ε keeps no pair: loss 0.

    Args:
        s, t: ``(n, dim)`` pooled embeddings (not normalized), row ``i`` of each a pair.
        alpha, beta: scales of the positive and negative terms.
        lam: the cosine at which a pair's weight turns.
        epsilon: the mining margin.
        negatives: ``"both"`` or ``"other_side"``.

    Example:
        >>> s = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> float(pair_weighting_loss(s, s, alpha=2, beta=50, lam=0.5, epsilon=0.1))
        0.0
    """
    if negatives not in ("both", "other_side"):
        raise ValueError(f"negatives: expected both or other_side, got {negatives!r}")
    return _PairWeighting.apply(s, t, (alpha, beta, lam, epsilon), negatives == "both")


def _unit(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows scaled to unit length and their norms (clamped as the margin loss's cosines are)."""
    norm = x.norm(dim=1, keepdim=True).clamp(min=1e-8)
    return x / norm, norm


def _unit_backward(grad: torch.Tensor, unit: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
    """``d x̂ → d x`` through ``x̂ = x / |x|``: the gradient's part orthogonal to ``x̂``, / |x|."""
    return (grad - (grad * unit).sum(dim=1, keepdim=True) * unit) / norm


def _anchor_terms(
    sims: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, hyper: tuple
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each anchor's (row's) loss and the loss's gradient on ``sims``, one anchor per row.

    ``positive`` holds each row's positive column, ``negative`` masks its negative columns.
    The gradient is the pair weights of the method: ``-e^{-α(S_ip - λ)} / (1 + Σ_pos ...)``
    on a kept positive, ``e^{β(S_ij - λ)} / (1 + Σ_neg ...)`` on a kept negative, 0 elsewhere.
    """
    alpha, beta, lam, epsilon = hyper
    rows = torch.arange(len(sims), device=sims.device)
    pos = sims[rows, positive]
    hardest = sims.masked_fill(~negative, -torch.inf).amax(dim=1)
    keep_pos = pos - epsilon < hardest
    keep_neg = negative & (sims + epsilon > pos.unsqueeze(1))
    pos_arg = -alpha * (pos - lam)
    neg_arg = (beta * (sims - lam)).masked_fill(~keep_neg, -torch.inf)
    zero = torch.zeros(len(sims), 1, dtype=sims.dtype, device=sims.device)
    neg_lse = torch.logsumexp(torch.cat([zero, neg_arg], dim=1), dim=1)
    loss = keep_pos * F.softplus(pos_arg) / alpha + neg_lse / beta
    grad = torch.exp(neg_arg - neg_lse.unsqueeze(1))
    grad[rows, positive] = -keep_pos.to(sims.dtype) * torch.sigmoid(pos_arg)
    return loss, grad


class _PairWeighting(torch.autograd.Function):
    """:func:`pair_weighting_loss` with its gradient written out: the pair weights
    (:func:`_anchor_terms`) times the cosines' gradients, as two matrix products."""

    @staticmethod
    def forward(ctx, s, t, hyper: tuple, both_sides: bool):
        n = len(s)
        s_unit, s_norm = _unit(s)
        t_unit, t_norm = _unit(t)
        index = torch.arange(2 * n, device=s.device)
        if both_sides:  # anchors and candidates: all 2n sentences
            units = torch.cat([s_unit, t_unit])
            sims = units @ units.T
            positive = (index + n) % (2 * n)
            negative = (index.unsqueeze(1) != index) & (positive.unsqueeze(1) != index)
        else:  # sources against targets, then targets against sources
            cross = s_unit @ t_unit.T
            sims = torch.cat([cross, cross.T])
            positive = index % n
            negative = positive.unsqueeze(1) != index[:n]
        loss, grad = _anchor_terms(sims, positive, negative, hyper)
        ctx.save_for_backward(grad / (2 * n), s_unit, s_norm, t_unit, t_norm)
        ctx.both_sides = both_sides
        return loss.mean()

    @staticmethod
    def backward(ctx, out_grad):
        grad, s_unit, s_norm, t_unit, t_norm = ctx.saved_tensors
        n = len(s_unit)
        if ctx.both_sides:
            units = torch.cat([s_unit, t_unit])
            d_units = (grad + grad.T) @ units
            d_s, d_t = d_units[:n], d_units[n:]
        else:
            d_cross = grad[:n] + grad[n:].T
            d_s, d_t = d_cross @ t_unit, d_cross.T @ s_unit
        d_s = _unit_backward(d_s, s_unit, s_norm) * out_grad
        d_t = _unit_backward(d_t, t_unit, t_norm) * out_grad
        return d_s, d_t, None, None
