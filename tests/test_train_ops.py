"""Training pieces on hand-made tensors: negative mining, pooling and loss gradients, row
gathering, and the lazy vs dense Adam updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from psp.train import Bags, margin_loss, mine_negatives, pool, row_gradients, unique_rows
from psp.train.kernels import adam_rows_, candidate_tolerance
from psp.train.ops import drop_tokens, sorted_row_gradients
from psp.train.optim import DenseAdam, LazyAdam, fused_adam_rows_

PRECISIONS = ["float32", "bfloat16"]


@pytest.mark.parametrize("precision", PRECISIONS)
def test_mined_negative_is_hardest_and_never_own_partner(precision):
    gen = torch.Generator().manual_seed(0)
    src = torch.nn.functional.normalize(torch.randn(301, 8, generator=gen), dim=1)
    # each target is a noisy copy of its source, so the own partner is the nearest: must be skipped
    tgt = torch.nn.functional.normalize(src + 0.05 * torch.randn(301, 8, generator=gen), dim=1)
    neg_tgt, neg_src = mine_negatives(src, tgt, block=64, precision=precision)
    own = torch.arange(301)
    assert not (neg_tgt == own).any() and not (neg_src == own).any()
    sims = src @ tgt.T
    sims.fill_diagonal_(-float("inf"))
    assert torch.equal(neg_tgt, sims.argmax(dim=1))
    assert torch.equal(neg_src, sims.argmax(dim=0))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("block", [1, 7, 64, 500])
def test_mined_negatives_break_ties_like_argmax(block, precision):
    # few distinct vectors: many ties, across and inside blocks; argmax takes the first.
    # Entries in {-1, 0, 1} make every dot product exact whatever the summation order.
    gen = torch.Generator().manual_seed(3)
    basis = torch.randint(-1, 2, (4, 8), generator=gen).float()
    src = basis[torch.randint(0, 4, (97,), generator=gen)]
    tgt = basis[torch.randint(0, 4, (97,), generator=gen)]
    neg_tgt, neg_src = mine_negatives(src, tgt, block=block, precision=precision)
    sims = src @ tgt.T
    sims.fill_diagonal_(-float("inf"))
    assert torch.equal(neg_tgt, sims.argmax(dim=1))
    assert torch.equal(neg_src, sims.argmax(dim=0))


def test_bfloat16_mining_finds_the_float32_negatives_of_real_sentences(spm_path, news):
    """Sentence embeddings (a random table over real text: many near neighbours) mined with
    the bfloat16 product and with float32: the same negatives, or, where a choice differs, one
    of the same float32 cosine to within float32 rounding."""
    from psp.model.piece_encoder import PieceEncoder

    encoder = PieceEncoder(spm_path)
    ids, offsets = encoder.encode(news[:3000])
    bags = Bags(torch.from_numpy(ids).long(), torch.from_numpy(offsets).long())
    table = torch.randn(encoder.vocab_size, 256, generator=torch.Generator().manual_seed(6))
    emb = F.normalize(F.embedding_bag(bags.ids, table, bags.offsets[:-1], mode="mean"), dim=1)
    src, tgt = emb[:1500], emb[1500:]
    exact = mine_negatives(src, tgt, block=256, precision="float32")
    fast = mine_negatives(src, tgt, block=256, precision="bfloat16")
    rows = torch.arange(1500)
    for (ours, theirs), cosine in zip(
        zip(fast, exact),
        (lambda j: (src[rows] * tgt[j]).sum(1), lambda i: (src[i] * tgt[rows]).sum(1)),
    ):
        assert (ours == theirs).float().mean() > 0.999
        torch.testing.assert_close(cosine(ours), cosine(theirs), rtol=0, atol=1e-6)


def test_bfloat16_product_error_stays_within_half_the_candidate_tolerance():
    """Near the worst case of the bound (a unit vector of equal entries, |x_i y_i| summing to 1;
    at dim 1000 each entry loses 0.4 % to bfloat16 rounding, near the most it can) and random
    unit vectors."""
    for dim in (64, 1000, 1024):
        flat = torch.full((1, dim), dim**-0.5)
        rand = F.normalize(torch.randn(500, dim, generator=torch.Generator().manual_seed(7)), dim=1)
        for x in (flat, rand):
            error = (x.bfloat16() @ x.bfloat16().T).float() - x @ x.T
            assert float(error.abs().max()) <= candidate_tolerance(dim) / 2


@pytest.mark.parametrize("gradients", [row_gradients, sorted_row_gradients])
def test_row_gradients_are_the_embedding_bag_gradient(gradients):
    gen = torch.Generator().manual_seed(4)
    lengths = torch.tensor([3, 0, 1, 5, 2, 4])  # an empty bag too
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    local = torch.randint(0, 9, (int(offsets[-1]),), generator=gen)  # rows 9-11 unused
    block = torch.randn(12, 6, generator=gen).requires_grad_()
    out_grad = torch.randn(6, 6, generator=gen)
    F.embedding_bag(local, block, offsets[:-1], mode="mean").backward(out_grad)
    ours = gradients(out_grad, local, Bags(local, offsets), 12)
    torch.testing.assert_close(ours, block.grad, rtol=0, atol=1e-6)
    assert torch.equal(ours[9:], torch.zeros(3, 6))


def test_cpu_row_gradients_give_the_sorted_sums_bits():
    """The kernel adds each row's tokens in token order, as the stable sort does."""
    gen = torch.Generator().manual_seed(5)
    lengths = torch.randint(0, 30, (200,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    local = torch.randint(0, 300, (int(offsets[-1]),), generator=gen)
    grad = torch.randn(200, 64, generator=gen)
    bags = Bags(local, offsets)
    assert torch.equal(
        row_gradients(grad, local, bags, 300), sorted_row_gradients(grad, local, bags, 300)
    )


def test_pool_forward_gives_the_inference_pooling_bits(spm_path, news):
    """Training's pooling (torch, its own backward) and :func:`psp.model.pooling.mean_pool` (what
    ``psp.load(dir).embed``, ``psp embed`` and ``psp score`` pool with) are one definition: the
    same bits for every sentence with a known piece; only inference zeroes the others."""
    from psp.model.piece_encoder import PieceEncoder
    from psp.model.pooling import mean_pool

    encoder = PieceEncoder(spm_path)
    sentences = [*news[:500], "", "\ua66e\ua66e"]
    ids, offsets = encoder.encode(sentences)
    table = torch.randn(encoder.vocab_size, 96, generator=torch.Generator().manual_seed(8))
    bags = Bags(torch.from_numpy(ids).long(), torch.from_numpy(offsets).long())
    trained = pool(table, bags).numpy()
    inferred = mean_pool(
        table.numpy(),
        ids,
        offsets,
        out=np.empty_like(trained),
        textless_ids=encoder.textless_ids,
        threads=2,
    )
    assert np.array_equal(trained[:500], inferred[:500])
    assert not inferred[500:].any() and trained[500:].any()


def test_margin_loss_and_its_gradient_match_autograd_through_cosine_similarity():
    gen = torch.Generator().manual_seed(6)
    # scaled copies: a few hinges inactive, so the gradient's case split is exercised
    base = torch.randn(16, 5, generator=gen, dtype=torch.float64)
    inputs = [
        (base * (1 + k) + 0.7 * torch.randn(16, 5, generator=gen, dtype=torch.float64))
        .detach()
        .requires_grad_()
        for k in range(4)
    ]

    def reference(s, t, t_neg, s_neg, margin):
        pos = F.cosine_similarity(s, t)
        hinge_t = F.relu(margin - pos + F.cosine_similarity(s, t_neg))
        return (hinge_t + F.relu(margin - pos + F.cosine_similarity(t, s_neg))).mean()

    ours, ref = margin_loss(*inputs, margin=0.4), reference(*inputs, 0.4)
    torch.testing.assert_close(ours, ref)
    for a, b in zip(torch.autograd.grad(ours, inputs), torch.autograd.grad(ref, inputs)):
        torch.testing.assert_close(a, b)
    assert torch.autograd.gradcheck(lambda *x: margin_loss(*x, margin=0.4), inputs)


def test_unique_rows_is_torch_unique():
    ids = torch.tensor([7, 3, 3, 0, 9, 7, 7])
    rows, local = unique_rows(ids, vocab=12)
    ref_rows, ref_local = torch.unique(ids, return_inverse=True)
    assert torch.equal(rows, ref_rows) and torch.equal(local, ref_local)


def test_bags_select_gathers_sentences():
    bags = Bags(torch.tensor([1, 2, 3, 4, 5, 6]), torch.tensor([0, 2, 3, 6]))
    picked = bags.select(torch.tensor([2, 0, 2]))
    assert picked.ids.tolist() == [4, 5, 6, 1, 2, 4, 5, 6]
    assert picked.offsets.tolist() == [0, 3, 5, 8]


# --- optimizers ----------------------------------------------------------------------------


def _random_rows(gen, vocab, k):
    return torch.randperm(vocab, generator=gen)[:k].sort().values


def test_lazy_adam_is_torch_sparse_adam():
    gen = torch.Generator().manual_seed(1)
    table = torch.randn(50, 6, generator=gen)
    ours, ref = table.clone(), torch.nn.Parameter(table.clone())
    lazy, sparse = LazyAdam(ours, lr=0.01), torch.optim.SparseAdam([ref], lr=0.01)
    for _ in range(6):
        rows = _random_rows(gen, 50, 12)
        grad = torch.randn(12, 6, generator=gen)
        lazy.step(rows, grad)
        ref.grad = torch.sparse_coo_tensor(rows[None], grad, (50, 6), check_invariants=True)
        sparse.step()
    torch.testing.assert_close(ours, ref.detach(), rtol=1e-5, atol=1e-6)


def _twin_tables(seed: int, rows: int, dim: int):
    """A generator and two equal random tables, for two optimizers to update side by side."""
    gen = torch.Generator().manual_seed(seed)
    table = torch.randn(rows, dim, generator=gen)
    return gen, table.clone(), table.clone()


def test_cpu_update_kernel_is_torch_fused_adam():
    """The in-place kernel against ``torch._fused_adam_`` on gathered rows (the update before
    the kernel, and the one other devices run): 30 steps, clipped, within float32 rounding."""
    gen, a, b = _twin_tables(5, 300, 64)
    kernel, fused = LazyAdam(a, lr=0.01), LazyAdam(b, lr=0.01)
    for step in range(1, 31):
        rows = _random_rows(gen, 300, 120)
        grad = torch.randn(120, 64, generator=gen) * step
        kernel.steps = fused.steps = step
        adam_rows_(kernel, rows, grad, grad_scale=0.5)
        fused_adam_rows_(fused, rows, grad, grad_scale=0.5)
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(kernel.exp_avg, fused.exp_avg, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(kernel.exp_avg_sq, fused.exp_avg_sq, rtol=1e-5, atol=1e-6)


def test_lazy_equals_dense_adam_when_every_row_has_gradient():
    gen, a, b = _twin_tables(2, 20, 4)
    lazy, dense = LazyAdam(a, lr=0.01), DenseAdam(b, lr=0.01)
    for _ in range(5):
        grad = torch.randn(20, 4, generator=gen)
        lazy.step(torch.arange(20), grad)
        dense.step(torch.arange(20), grad)
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_lazy_adam_leaves_idle_rows_where_dense_adam_moves_them():
    table = torch.zeros(10, 3)
    a, b = table.clone(), table.clone()
    lazy, dense = LazyAdam(a, lr=0.1), DenseAdam(b, lr=0.1)
    for opt in (lazy, dense):
        opt.step(torch.arange(10), torch.ones(10, 3))  # step 1: every row
    torch.testing.assert_close(a, b)
    after_one = a.clone()
    for opt in (lazy, dense):
        opt.step(torch.tensor([0, 1]), torch.ones(2, 3))  # step 2: rows 0-1 only
    torch.testing.assert_close(a[:2], b[:2])
    assert torch.equal(a[2:], after_one[2:])  # lazy: untouched
    assert (b[2:] < after_one[2:]).all()  # dense: momentum keeps moving them


class Recorder:
    """An optimizer that only keeps the gradient it is given."""

    def step(self, rows, grad, *, grad_scale=1.0, step=None):
        self.grad = grad * grad_scale


@pytest.mark.parametrize("clip", [None, 1e-3])
def test_train_step_clips_the_gradient_norm(clip):
    from psp.train import MinedMegabatch, TrainConfig, train_step

    gen = torch.Generator().manual_seed(8)
    table = torch.randn(40, 6, generator=gen)
    ids = torch.randint(0, 40, (60,), generator=gen)
    bags = Bags(ids, torch.arange(0, 61, 5))  # 12 sentences of 5 pieces
    shuffled = torch.randperm(12, generator=gen)
    cfg = TrainConfig(dim=6, grad_clip=clip)
    recorder = Recorder()
    pairs = torch.arange(12)
    batch = MinedMegabatch(bags, bags.select(shuffled), pairs.roll(1), pairs.roll(2))
    train_step(table, recorder, batch, pairs=pairs, cfg=cfg)
    norm = float(torch.linalg.vector_norm(recorder.grad))
    if clip is None:
        assert norm > 1e-2  # the unclipped norm is far above the clip tested
    else:
        assert norm == pytest.approx(clip, rel=1e-3)


def test_token_dropout_leaves_out_pieces_but_never_a_whole_sentence():
    lengths = torch.tensor([0, 1, 3, 40, 2000])
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    bags = Bags(torch.arange(int(offsets[-1])), offsets)
    for seed in range(20):
        dropped = drop_tokens(bags, 0.5, torch.Generator().manual_seed(seed))
        kept = dropped.offsets[1:] - dropped.offsets[:-1]
        assert kept[0] == 0 and kept[1] == 1 and (kept[2:] >= 1).all()
        # The survivors are the sentence's own pieces, in order.
        for k in range(len(lengths)):
            ids = dropped.ids[dropped.offsets[k] : dropped.offsets[k + 1]]
            assert ((ids >= offsets[k]) & (ids < offsets[k + 1])).all()
            assert (ids[1:] > ids[:-1]).all()
    share = 1 - kept[-1].item() / 2000
    assert 0.45 < share < 0.55
    same = drop_tokens(bags, 0.5, torch.Generator().manual_seed(19))
    assert torch.equal(same.ids, dropped.ids)
