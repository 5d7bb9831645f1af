"""Training: schedule, negative mining, lazy vs dense Adam, a real tiny run, exact resume."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from psp.io import InputError, atomic_open
from psp.optim import DenseAdam, LazyAdam
from psp.train import (
    Bags,
    TrainConfig,
    has_checkpoint,
    margin_loss,
    megabatch_size_at,
    mine_negatives,
    pair_metrics,
    plan_megabatches,
    pool,
    train,
    unique_rows,
)

N_TRAIN, N_HELD = 3000, 512


def _read_pairs(shared: Path, n: int) -> list[tuple[str, str]]:
    base = shared / "bitext" / "es-en" / "wmt-newstest"
    with gzip.open(f"{base}.es.gz", "rt") as es, gzip.open(f"{base}.en.gz", "rt") as en:
        pairs = []
        for a, b in zip(es, en):
            a, b = a.strip().replace("\t", " "), b.strip().replace("\t", " ")
            if a and b:
                pairs.append((a.lower(), b.lower()))
            if len(pairs) == n:
                return pairs
    raise AssertionError("not enough pairs in the mirror")


@pytest.fixture(scope="module")
def tiny(shared_data, tmp_path_factory):
    """3k real es-en training pairs in HDF5, a 300-piece SentencePiece model, held-out pairs."""
    from psp.hdf5 import write_pairs
    from psp.spm import PieceEncoder, train_spm

    root = tmp_path_factory.mktemp("tiny")
    pairs = _read_pairs(shared_data, N_TRAIN + N_HELD)
    train_pairs, held = pairs[:N_TRAIN], pairs[N_TRAIN:]
    with atomic_open(root / "pairs.tsv.gz") as fh:
        fh.writelines(f"{a}\t{b}\n" for a, b in train_pairs)
    spm = train_spm([s for pair in train_pairs for s in pair], root / "spm.model", vocab_size=300)
    write_pairs(root / "pairs.tsv.gz", spm, root / "pairs.h5", seed=0)
    encoder = PieceEncoder(spm)
    held_bags = [Bags(*map(torch.from_numpy, encoder.encode(side))) for side in zip(*held)]
    held_bags = [Bags(b.ids.long(), b.offsets) for b in held_bags]
    return {"h5": root / "pairs.h5", "spm": spm, "held": held_bags}


def tiny_config(**overrides) -> TrainConfig:
    values = dict(dim=32, batch_size=32, megabatch_size=4, anneal=5, epochs=2, lr=0.01)
    values.update(threads=1, checkpoint_every=10, log_every=5)
    return TrainConfig(**{**values, **overrides})


def weights(model_dir: Path) -> torch.Tensor:
    return next(iter(load_file(str(model_dir / "embeddings.safetensors")).values()))


# --- pure pieces ---------------------------------------------------------------------------


def test_megabatch_size_anneals_and_never_resets():
    sizes = [megabatch_size_at(step, anneal=150, cap=100) for step in (0, 149, 150, 299, 300)]
    assert sizes == [1, 1, 2, 2, 3]
    assert megabatch_size_at(10**7, 150, 100) == 100
    # a plan resumed mid-epoch continues the global schedule
    cfg = TrainConfig(batch_size=10, anneal=3, megabatch_size=4)
    plan = list(plan_megabatches(200, 0, 0, cfg))
    assert [stop - start for start, stop, _ in plan[:5]] == [10, 10, 10, 20, 20]
    resumed = list(plan_megabatches(200, plan[3][0], plan[3][2], cfg))
    assert resumed == plan[3:]
    assert plan[-1][1] == 200


def test_unknown_config_key_is_named():
    with pytest.raises(ValueError, match="megabatch_sise"):
        TrainConfig.from_dict({"dim": 8, "megabatch_sise": 3})
    assert TrainConfig.from_dict({"dim": 8}).dim == 8


def test_mined_negative_is_hardest_and_never_own_partner():
    gen = torch.Generator().manual_seed(0)
    src = torch.nn.functional.normalize(torch.randn(301, 8, generator=gen), dim=1)
    # each target is a noisy copy of its source, so the own partner is the nearest: must be skipped
    tgt = torch.nn.functional.normalize(src + 0.05 * torch.randn(301, 8, generator=gen), dim=1)
    neg_tgt, neg_src = mine_negatives(src, tgt, block=64)
    own = torch.arange(301)
    assert not (neg_tgt == own).any() and not (neg_src == own).any()
    sims = src @ tgt.T
    sims.fill_diagonal_(-float("inf"))
    assert torch.equal(neg_tgt, sims.argmax(dim=1))
    assert torch.equal(neg_src, sims.argmax(dim=0))


@pytest.mark.parametrize("block", [1, 7, 64, 500])
def test_mined_negatives_break_ties_like_argmax(block):
    # few distinct vectors: many ties, across and inside blocks; argmax takes the first.
    # Entries in {-1, 0, 1} make every dot product exact whatever the summation order.
    gen = torch.Generator().manual_seed(3)
    basis = torch.randint(-1, 2, (4, 8), generator=gen).float()
    src = basis[torch.randint(0, 4, (97,), generator=gen)]
    tgt = basis[torch.randint(0, 4, (97,), generator=gen)]
    neg_tgt, neg_src = mine_negatives(src, tgt, block=block)
    sims = src @ tgt.T
    sims.fill_diagonal_(-float("inf"))
    assert torch.equal(neg_tgt, sims.argmax(dim=1))
    assert torch.equal(neg_src, sims.argmax(dim=0))


def test_pool_gradient_is_embedding_bag_gradient():
    gen = torch.Generator().manual_seed(4)
    lengths = torch.tensor([3, 0, 1, 5, 2])  # an empty bag too
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    ids = torch.randint(0, 9, (int(offsets[-1]),), generator=gen)  # rows 9-11 unused
    table = torch.randn(12, 6, generator=gen, dtype=torch.float64)
    out_grad = torch.randn(5, 6, generator=gen, dtype=torch.float64)
    ours, ref = table.clone().requires_grad_(), table.clone().requires_grad_()
    pool(ours, Bags(ids, offsets)).backward(out_grad)
    F.embedding_bag(ids, ref, offsets[:-1], mode="mean").backward(out_grad)
    torch.testing.assert_close(ours.grad, ref.grad)
    assert torch.autograd.gradcheck(
        lambda t: pool(t, Bags(ids, offsets)), table.clone().requires_grad_()
    )


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

    ours, ref = margin_loss(*inputs, 0.4), reference(*inputs, 0.4)
    torch.testing.assert_close(ours, ref)
    for a, b in zip(torch.autograd.grad(ours, inputs), torch.autograd.grad(ref, inputs)):
        torch.testing.assert_close(a, b)
    assert torch.autograd.gradcheck(lambda *x: margin_loss(*x, 0.4), inputs)


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


def test_lazy_adam_with_gathered_values_is_the_same_update():
    gen = torch.Generator().manual_seed(5)
    table = torch.randn(30, 5, generator=gen)
    a, b = table.clone(), table.clone()
    plain, shared = LazyAdam(a, lr=0.01), LazyAdam(b, lr=0.01)
    for _ in range(4):
        rows = _random_rows(gen, 30, 9)
        grad = torch.randn(9, 5, generator=gen)
        plain.step(rows, grad)
        shared.step(rows, grad, values=b.index_select(0, rows))
    assert torch.equal(a, b)
    assert torch.equal(plain.exp_avg_sq, shared.exp_avg_sq)


def test_lazy_equals_dense_adam_when_every_row_has_gradient():
    gen = torch.Generator().manual_seed(2)
    table = torch.randn(20, 4, generator=gen)
    a, b = table.clone(), table.clone()
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


# --- real training -------------------------------------------------------------------------


def test_training_improves_held_out_loss_and_retrieval(tiny, tmp_path):
    from psp.model import PSPModel, load

    cfg = tiny_config(epochs=5)
    src, tgt = tiny["held"]
    init = PSPModel.from_spm(tiny["spm"], dim=cfg.dim, seed=cfg.seed).embedding.weight.detach()
    before = pair_metrics(init, src, tgt, batch=128)
    out = train(cfg, tiny["h5"], tiny["spm"], tmp_path / "model", tmp_path / "work")
    trained = load(out)
    after = pair_metrics(trained.embedding.weight.detach(), src, tgt, batch=128)
    assert after["loss"] < 0.8 * before["loss"], (before, after)
    assert after["accuracy"] > before["accuracy"] + 0.05, (before, after)

    provenance = json.loads((out / "config.json").read_text())["provenance"]
    assert provenance["train_config"]["dim"] == 32
    assert provenance["h5"]["n_pairs"] == N_TRAIN
    assert provenance["steps"] > 0 and provenance["final_loss"] > 0
    log_lines = (tmp_path / "work" / "train_log.tsv").read_text().splitlines()
    assert log_lines[0].split("\t")[:4] == ["event", "step", "epoch", "loss"]
    assert sum(line.startswith("epoch\t") for line in log_lines) == 5
    assert (tmp_path / "work" / "learning_curve.png").stat().st_size > 1000


def test_first_step_same_for_sparse_and_dense_adam(tiny, tmp_path):
    runs = {}
    for sparse in (True, False):
        cfg = tiny_config(sparse=sparse, max_steps=1)
        runs[sparse] = weights(
            train(cfg, tiny["h5"], tiny["spm"], tmp_path / f"m{sparse}", tmp_path / f"w{sparse}")
        )
    torch.testing.assert_close(runs[True], runs[False], rtol=1e-5, atol=1e-6)


def test_interrupted_and_resumed_run_ends_with_identical_parameters(tiny, tmp_path):
    cfg = tiny_config(dropout=0.1, checkpoint_every=7)
    straight = weights(train(cfg, tiny["h5"], tiny["spm"], tmp_path / "a", tmp_path / "wa"))

    def crash(step: int) -> None:
        if step == 33:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(cfg, tiny["h5"], tiny["spm"], tmp_path / "b", tmp_path / "wb", on_step=crash)
    meta = json.loads((tmp_path / "wb" / "checkpoints" / "state.json").read_text())
    assert 7 <= meta["state"]["step"] < 33  # the resume really replays steps
    resumed = train(cfg, tiny["h5"], tiny["spm"], tmp_path / "b", tmp_path / "wb", resume=True)
    assert torch.equal(weights(resumed), straight)


def test_resuming_a_finished_run_rewrites_its_deleted_outputs(tiny, tmp_path):
    """A workflow deletes a job's outputs before rerunning it (e.g. after a config change that
    keeps the checkpoint valid); the resumed run has nothing left to train but must export the
    same model, log and learning curve again."""
    cfg = tiny_config(epochs=2)
    first = weights(train(cfg, tiny["h5"], tiny["spm"], tmp_path / "m", tmp_path / "w"))
    log = (tmp_path / "w" / "train_log.tsv").read_text()
    shutil.rmtree(tmp_path / "m")
    for output in ("train_log.tsv", "learning_curve.png"):
        (tmp_path / "w" / output).unlink()
    assert has_checkpoint(tmp_path / "w", cfg, tiny["h5"])
    again = train(cfg, tiny["h5"], tiny["spm"], tmp_path / "m", tmp_path / "w", resume=True)
    assert torch.equal(weights(again), first)
    assert (tmp_path / "w" / "train_log.tsv").read_text() == log
    assert (tmp_path / "w" / "learning_curve.png").stat().st_size > 1000


def test_incompatible_checkpoint_is_discarded(tiny, tmp_path):
    train(tiny_config(max_steps=3), tiny["h5"], tiny["spm"], tmp_path / "m", tmp_path / "w")
    assert not has_checkpoint(tmp_path / "w", tiny_config(dim=16), tiny["h5"])
    assert not (tmp_path / "w" / "checkpoints").exists()


def test_resume_refuses_another_architecture(tiny, tmp_path):
    train(tiny_config(max_steps=3), tiny["h5"], tiny["spm"], tmp_path / "m", tmp_path / "w")
    with pytest.raises(InputError, match="dim=32"):
        train(
            tiny_config(dim=16),
            tiny["h5"],
            tiny["spm"],
            tmp_path / "m",
            tmp_path / "w",
            resume=True,
        )


def test_evaluator_selects_best_epoch(tiny, tmp_path):
    scores = iter([0.5, 0.9, 0.1])
    seen = []

    def evaluator(model):
        seen.append(model.embedding.weight.detach().clone())
        return {"dev": next(scores)}

    out = train(
        tiny_config(epochs=3),
        tiny["h5"],
        tiny["spm"],
        tmp_path / "m",
        tmp_path / "w",
        evaluator=evaluator,
    )
    assert torch.equal(weights(out), seen[1])
    assert json.loads((out / "config.json").read_text())["provenance"]["best_epoch"] == 1
    assert "dev" in (tmp_path / "w" / "train_log.tsv").read_text().splitlines()[0]


def test_cli_train_with_config_file(tiny, tmp_path):
    from psp.cli import main

    config = tmp_path / "train.yaml"
    config.write_text("dim: 16\nbatch_size: 32\nmegabatch_size: 2\nthreads: 1\n")
    argv = [
        "train",
        "--h5",
        str(tiny["h5"]),
        "--spm",
        str(tiny["spm"]),
        "--model-dir",
        str(tmp_path / "m"),
        "--work-dir",
        str(tmp_path / "w"),
        "--config",
        str(config),
    ]
    assert main([*argv, "--epochs", "1"]) == 0
    assert weights(tmp_path / "m").shape[1] == 16
    config.write_text("dim: 16\nbatchsize: 32\n")
    assert main(argv) == 2  # unknown key → clear error, not a traceback


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_train_on_cuda(tiny, tmp_path):
    out = train(
        tiny_config(device="cuda", epochs=1),
        tiny["h5"],
        tiny["spm"],
        tmp_path / "m",
        tmp_path / "w",
    )
    assert np.isfinite(weights(out).numpy()).all()
