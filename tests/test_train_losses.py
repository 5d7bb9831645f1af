"""The pair-weighting (multi-similarity) loss against its direct formula, written anchor by
anchor and pair by pair, on small random minibatches: value, gradient and the mining rule."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from psp.train import MarginLoss, PairWeightingLoss, TrainConfig, loss_for, pair_weighting_loss

HYPER = dict(alpha=2.0, beta=50.0, lam=0.5, epsilon=0.1)


def direct_loss(s, t, *, alpha, beta, lam, epsilon, negatives):
    """The method's formula, one anchor at a time; also counts the pairs mining kept and
    dropped. Anchors are the 2n sentences, each one's positive its partner."""
    n = len(s)
    units = F.normalize(torch.cat([s, t]), dim=1)
    total, kept, dropped = 0.0, 0, 0
    for i in range(2 * n):
        partner = (i + n) % (2 * n)
        side = i // n
        candidates = [
            j
            for j in range(2 * n)
            if j not in (i, partner) and (negatives == "both" or j // n != side)
        ]
        positive = units[i] @ units[partner]
        negative = {j: units[i] @ units[j] for j in candidates}
        hardest = max(sim.item() for sim in negative.values())
        if positive.item() - epsilon < hardest:
            total = total + torch.log(1 + torch.exp(-alpha * (positive - lam))) / alpha
            kept += 1
        else:
            dropped += 1
        weights = torch.zeros((), dtype=units.dtype)
        for sim in negative.values():
            if sim.item() + epsilon > positive.item():
                weights = weights + torch.exp(beta * (sim - lam))
                kept += 1
            else:
                dropped += 1
        total = total + torch.log(1 + weights) / beta
    return total / (2 * n), kept, dropped


def noisy_pairs(seed: int, n: int = 9, dim: int = 6, noise: float = 0.9):
    """Pairs whose targets are noisy copies of their sources, in float64: some pairs well
    placed, some not, so mining keeps some and drops others."""
    gen = torch.Generator().manual_seed(seed)
    s = torch.randn(n, dim, generator=gen, dtype=torch.float64)
    t = 1.3 * s + noise * torch.randn(n, dim, generator=gen, dtype=torch.float64)
    return s.requires_grad_(), t.requires_grad_()


@pytest.mark.parametrize("negatives", ["both", "other_side"])
@pytest.mark.parametrize(
    "hyper",
    [
        HYPER,
        dict(alpha=2.0, beta=20.0, lam=0.1, epsilon=0.05),
        dict(alpha=5.0, beta=10.0, lam=-0.2, epsilon=2.5),  # epsilon 2.5: nothing mined away
    ],
)
def test_loss_and_gradient_match_the_direct_formula(negatives, hyper):
    for seed in range(3):
        s, t = noisy_pairs(seed)
        ours = pair_weighting_loss(s, t, negatives=negatives, **hyper)
        ref, kept, dropped = direct_loss(s, t, negatives=negatives, **hyper)
        torch.testing.assert_close(ours, ref)
        for a, b in zip(torch.autograd.grad(ours, (s, t)), torch.autograd.grad(ref, (s, t))):
            torch.testing.assert_close(a, b)
        assert kept > 0
        assert (dropped == 0) == (hyper["epsilon"] > 2)  # the mining rule was exercised


@pytest.mark.parametrize("negatives", ["both", "other_side"])
def test_gradient_passes_gradcheck(negatives):
    s, t = noisy_pairs(7, n=5, dim=4)
    hyper = dict(alpha=2.0, beta=10.0, lam=0.3, epsilon=0.1)
    assert torch.autograd.gradcheck(
        lambda a, b: pair_weighting_loss(a, b, negatives=negatives, **hyper), (s, t)
    )


@pytest.mark.parametrize("negatives", ["both", "other_side"])
def test_a_minibatch_of_well_placed_pairs_has_zero_loss_and_gradient(negatives):
    # each pair on its own axis (cosine 0 to every other sentence), partners at cosine ~0.995
    gen = torch.Generator().manual_seed(2)
    s = 3 * torch.eye(6, 8, dtype=torch.float64)
    t = s + 0.1 * torch.rand(6, 8, generator=gen, dtype=torch.float64) * (s == 0)
    s, t = s.requires_grad_(), t.requires_grad_()
    loss = pair_weighting_loss(s, t, negatives=negatives, **HYPER)
    assert loss.item() == 0.0
    loss.backward()
    assert not s.grad.any() and not t.grad.any()
    # one badly placed pair (a target swapped) brings loss and gradient back
    swapped = t.detach().clone()
    swapped[[0, 1]] = swapped[[1, 0]]
    assert pair_weighting_loss(s, swapped, negatives=negatives, **HYPER).item() > 0.1


def test_mining_drops_a_negative_farther_than_epsilon_below_the_positive():
    # source 0 (e1) has its partner at cosine 0.8 and two other targets at 0.75 (within
    # epsilon 0.1 of the positive: kept) and 0.6 (dropped). Target 2's own pair is perfectly
    # placed (source 2 equals it) and source 1 is orthogonal to the plane of the targets, so
    # only the pair (source 0, target 2) could move target 2 along e1.
    def unit(cos):
        return [cos, math.sqrt(1 - cos**2), 0.0]

    t = torch.tensor([unit(0.8), unit(0.75), unit(0.6)], dtype=torch.float64)
    s = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], unit(0.6)], dtype=torch.float64)
    along_e1 = {}
    for epsilon in (0.1, 0.5):
        hyper = {**HYPER, "epsilon": epsilon}
        target = t.clone().requires_grad_()
        loss = pair_weighting_loss(s, target, negatives="other_side", **hyper)
        torch.testing.assert_close(loss, direct_loss(s, target, negatives="other_side", **hyper)[0])
        (grad,) = torch.autograd.grad(loss, target)
        along_e1[epsilon] = float(grad[2, 0])
    assert abs(along_e1[0.1]) < 1e-12  # dropped: no weight
    assert along_e1[0.5] > 1e-3  # within epsilon 0.5: kept, pushed away from source 0


def test_loss_for_builds_the_configured_objective():
    assert loss_for(TrainConfig()) == MarginLoss(0.4)
    cfg = TrainConfig(loss="pair_weighting", pw_lambda=0.3, pw_negatives="other_side")
    objective = loss_for(cfg)
    assert isinstance(objective, PairWeightingLoss) and not objective.mines_negatives
    assert (objective.lam, objective.negatives) == (0.3, "other_side")
    assert objective.alpha == cfg.pw_alpha


def test_unknown_negatives_are_refused():
    s, t = noisy_pairs(0)
    with pytest.raises(ValueError, match="negatives"):
        pair_weighting_loss(s, t, negatives="same_side", **HYPER)
