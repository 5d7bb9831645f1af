"""Real tiny training runs: learning, sparse vs dense Adam, exact resume, checkpoints,
best-epoch selection and ``psp train``."""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from psp.io import InputError, atomic_open
from psp.train import (
    TrainConfig,
    has_checkpoint,
    margin_loss,
    mine_negatives,
    train,
    train_step,
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
    from psp.data.pairs_store import write_pairs
    from psp.data.spm_training import train_spm

    root = tmp_path_factory.mktemp("tiny")
    pairs = _read_pairs(shared_data, N_TRAIN + N_HELD)
    train_pairs, held = pairs[:N_TRAIN], pairs[N_TRAIN:]
    with atomic_open(root / "pairs.tsv.gz") as fh:
        fh.writelines(f"{a}\t{b}\n" for a, b in train_pairs)
    spm = train_spm([s for pair in train_pairs for s in pair], root / "spm.model", vocab_size=300)
    write_pairs(root / "pairs.tsv.gz", spm, root / "pairs.h5", seed=0)
    return {"h5": root / "pairs.h5", "spm": spm, "held": held}


def tiny_config(**overrides) -> TrainConfig:
    values = dict(dim=32, batch_size=32, megabatch_size=4, anneal=5, epochs=2, lr=0.01)
    values.update(threads=1, checkpoint_every=10, log_every=5)
    return TrainConfig(**{**values, **overrides})


def weights(model_dir: Path) -> torch.Tensor:
    return next(iter(load_file(str(model_dir / "embeddings.safetensors")).values()))


# --- real training -------------------------------------------------------------------------


def held_out_quality(model, pairs: list[tuple[str, str]], batch: int = 128) -> dict[str, float]:
    """The training loss with in-batch hardest negatives, and in-batch retrieval accuracy, of
    ``model.embed`` on held-out pairs (batches of ``batch``)."""
    losses, hits = [], 0
    for lo in range(0, len(pairs) - 1, batch):
        part = pairs[lo : lo + batch]
        s, t = (
            F.normalize(torch.from_numpy(model.embed(list(side))), dim=1) for side in zip(*part)
        )
        neg_tgt, neg_src = mine_negatives(s, t)
        losses.append(float(margin_loss(s, t, t[neg_tgt], s[neg_src], margin=0.4)) * len(part))
        hits += int(((s @ t.T).argmax(dim=1) == torch.arange(len(part))).sum())
    return {"loss": sum(losses) / len(pairs), "accuracy": hits / len(pairs)}


def test_training_improves_held_out_loss_and_retrieval(tiny, tmp_path):
    from psp.model.torch_model import PSPModel, load

    cfg = tiny_config(epochs=5)
    init = PSPModel.from_spm(tiny["spm"], dim=cfg.dim, seed=cfg.seed)
    before = held_out_quality(init, tiny["held"])
    out = train(
        cfg, tiny["h5"], tiny["spm"], model_dir=tmp_path / "model", work_dir=tmp_path / "work"
    )
    after = held_out_quality(load(out), tiny["held"])
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


def test_pair_weighting_training_improves_held_out_retrieval(tiny, tmp_path):
    from psp.model.torch_model import PSPModel, load

    cfg = tiny_config(epochs=5, loss="pair_weighting")
    init = PSPModel.from_spm(tiny["spm"], dim=cfg.dim, seed=cfg.seed)
    before = held_out_quality(init, tiny["held"])
    out = train(
        cfg, tiny["h5"], tiny["spm"], model_dir=tmp_path / "model", work_dir=tmp_path / "work"
    )
    after = held_out_quality(load(out), tiny["held"])
    assert after["accuracy"] > before["accuracy"] + 0.05, (before, after)
    provenance = json.loads((out / "config.json").read_text())["provenance"]
    assert provenance["train_config"]["loss"] == "pair_weighting"


def test_both_objectives_train_on_the_same_minibatches(tiny, tmp_path):
    """The loss changes neither the per-epoch permutation nor how it is cut into minibatches."""
    from psp.train import step

    seen = {}
    for loss in ("margin", "pair_weighting"):
        seen[loss] = []

        def recording(table, optimizer, batch, *, pairs, _seen=seen[loss], **keys):
            _seen.append((batch.src.select(pairs).ids, batch.tgt.select(pairs).ids))
            return train_step(table, optimizer, batch, pairs=pairs, **keys)

        with mock.patch.object(step, "train_step", recording):
            run(tiny, tmp_path / loss, tiny_config(loss=loss))
    assert len(seen["margin"]) == len(seen["pair_weighting"]) > 150
    for (src_a, tgt_a), (src_b, tgt_b) in zip(seen["margin"], seen["pair_weighting"]):
        assert torch.equal(src_a, src_b) and torch.equal(tgt_a, tgt_b)


@pytest.mark.parametrize("loss", ["margin", "pair_weighting"])
def test_first_step_same_for_sparse_and_dense_adam(tiny, tmp_path, loss):
    runs = {}
    for sparse in (True, False):
        cfg = tiny_config(sparse=sparse, max_steps=1, loss=loss)
        runs[sparse] = weights(
            train(
                cfg,
                tiny["h5"],
                tiny["spm"],
                model_dir=tmp_path / f"m{sparse}",
                work_dir=tmp_path / f"w{sparse}",
            )
        )
    torch.testing.assert_close(runs[True], runs[False], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(  # mid-epoch 0 and mid-epoch 1 (~94 steps each)
    ("crash_at", "loss"), [(33, "margin"), (130, "margin"), (130, "pair_weighting")]
)
def test_interrupted_and_resumed_run_ends_with_identical_parameters(tiny, tmp_path, crash_at, loss):
    cfg = tiny_config(dropout=0.1, checkpoint_every=7, loss=loss)
    straight = weights(
        train(cfg, tiny["h5"], tiny["spm"], model_dir=tmp_path / "a", work_dir=tmp_path / "wa")
    )

    def crash(step: int) -> None:
        if step == crash_at:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(
            cfg,
            tiny["h5"],
            tiny["spm"],
            model_dir=tmp_path / "b",
            work_dir=tmp_path / "wb",
            on_step=crash,
        )
    meta = json.loads((tmp_path / "wb" / "checkpoints" / "state.json").read_text())
    assert crash_at - 20 <= meta["state"]["step"] < crash_at  # the resume replays steps
    assert 0 < meta["state"]["pos"]  # from the middle of an epoch
    resumed = train(
        cfg,
        tiny["h5"],
        tiny["spm"],
        model_dir=tmp_path / "b",
        work_dir=tmp_path / "wb",
        resume=True,
    )
    assert torch.equal(weights(resumed), straight)


def test_run_stopped_at_max_steps_continues_to_the_same_parameters(tiny, tmp_path):
    cfg = tiny_config(checkpoint_every=1000)
    straight = weights(
        train(cfg, tiny["h5"], tiny["spm"], model_dir=tmp_path / "a", work_dir=tmp_path / "wa")
    )
    stopped = dataclasses.replace(cfg, max_steps=50)
    train(stopped, tiny["h5"], tiny["spm"], model_dir=tmp_path / "b", work_dir=tmp_path / "wb")
    meta = json.loads((tmp_path / "wb" / "checkpoints" / "state.json").read_text())
    assert meta["state"]["epoch"] == 0 and 50 <= meta["state"]["step"] < 94
    resumed = train(
        cfg,
        tiny["h5"],
        tiny["spm"],
        model_dir=tmp_path / "b",
        work_dir=tmp_path / "wb",
        resume=True,
    )
    assert torch.equal(weights(resumed), straight)


def test_resuming_a_finished_run_rewrites_its_deleted_outputs(tiny, tmp_path):
    """A workflow deletes a job's outputs before rerunning it (e.g. after a config change that
    keeps the checkpoint valid); the resumed run has nothing left to train but must export the
    same model, log and learning curve again."""
    cfg = tiny_config(epochs=2)
    first = weights(
        train(cfg, tiny["h5"], tiny["spm"], model_dir=tmp_path / "m", work_dir=tmp_path / "w")
    )
    log = (tmp_path / "w" / "train_log.tsv").read_text()
    shutil.rmtree(tmp_path / "m")
    for output in ("train_log.tsv", "learning_curve.png"):
        (tmp_path / "w" / output).unlink()
    assert has_checkpoint(tmp_path / "w", cfg, tiny["h5"])
    again = train(
        cfg, tiny["h5"], tiny["spm"], model_dir=tmp_path / "m", work_dir=tmp_path / "w", resume=True
    )
    assert torch.equal(weights(again), first)
    assert (tmp_path / "w" / "train_log.tsv").read_text() == log
    assert (tmp_path / "w" / "learning_curve.png").stat().st_size > 1000


def test_incompatible_checkpoint_is_discarded(tiny, tmp_path):
    train(
        tiny_config(max_steps=3),
        tiny["h5"],
        tiny["spm"],
        model_dir=tmp_path / "m",
        work_dir=tmp_path / "w",
    )
    assert not has_checkpoint(tmp_path / "w", tiny_config(dim=16), tiny["h5"])
    assert not (tmp_path / "w" / "checkpoints").exists()


@pytest.mark.parametrize(
    "change", [{"lr": 5e-4}, {"margin": 0.3}, {"dropout": 0.1}, {"loss": "pair_weighting"}]
)
def test_a_finished_run_of_other_hyperparameters_is_trained_again(tiny, tmp_path, change):
    """A workflow reruns training when its params change. Resuming the finished checkpoint
    would export the old parameters under the new config's provenance."""
    cfg = tiny_config(epochs=2)
    first = weights(
        train(cfg, tiny["h5"], tiny["spm"], model_dir=tmp_path / "m", work_dir=tmp_path / "w")
    )
    changed = dataclasses.replace(cfg, **change)
    assert not has_checkpoint(tmp_path / "w", changed, tiny["h5"])
    again = weights(
        train(changed, tiny["h5"], tiny["spm"], model_dir=tmp_path / "m2", work_dir=tmp_path / "w")
    )
    assert not torch.equal(again, first)


def test_a_checkpoint_past_the_epochs_asked_is_discarded_and_one_short_of_them_resumed(
    tiny, tmp_path
):
    train(
        tiny_config(epochs=2),
        tiny["h5"],
        tiny["spm"],
        model_dir=tmp_path / "m",
        work_dir=tmp_path / "w",
    )
    assert has_checkpoint(tmp_path / "w", tiny_config(epochs=3), tiny["h5"])  # trains one more
    assert not has_checkpoint(tmp_path / "w", tiny_config(epochs=1), tiny["h5"])
    assert not (tmp_path / "w" / "checkpoints").exists()


def test_more_epochs_continue_a_finished_run_to_the_parameters_of_one_straight_run(tiny, tmp_path):
    straight = weights(
        train(
            tiny_config(epochs=3),
            tiny["h5"],
            tiny["spm"],
            model_dir=tmp_path / "a",
            work_dir=tmp_path / "wa",
        )
    )
    train(
        tiny_config(epochs=2),
        tiny["h5"],
        tiny["spm"],
        model_dir=tmp_path / "b",
        work_dir=tmp_path / "wb",
    )
    extended = train(
        tiny_config(epochs=3),
        tiny["h5"],
        tiny["spm"],
        model_dir=tmp_path / "b",
        work_dir=tmp_path / "wb",
        resume=True,
    )
    assert torch.equal(weights(extended), straight)


def run(tiny, tmp_path: Path, cfg: TrainConfig, **options) -> Path:
    """``train`` on the tiny data into ``tmp_path/m`` (model) and ``tmp_path/w`` (work)."""
    return train(
        cfg, tiny["h5"], tiny["spm"], model_dir=tmp_path / "m", work_dir=tmp_path / "w", **options
    )


def test_resume_refuses_another_architecture(tiny, tmp_path):
    run(tiny, tmp_path, tiny_config(max_steps=3))
    with pytest.raises(InputError, match="dim=32"):
        run(tiny, tmp_path, tiny_config(dim=16), resume=True)


class Scripted:
    """An evaluator returning given scores, one per epoch, remembering each epoch's table."""

    primary_metric = "dev_error"

    def __init__(self, scores, greater_is_better=True):
        self.scores, self.greater_is_better, self.seen = iter(scores), greater_is_better, []

    def __call__(self, model):
        self.seen.append(model.embedding.weight.detach().clone())
        return {"other": 0.0, "dev_error": next(self.scores)}


@pytest.mark.parametrize(
    ("scores", "greater", "best"),
    [
        ([0.5, 0.9, 0.1], True, 1),
        ([0.5, 0.9, 0.1], False, 2),  # an error: lower is better
        ([float("nan"), 0.2, 0.3], True, 2),  # a NaN first epoch does not block the others
        ([0.2, float("nan"), 0.1], True, 0),  # nor does a NaN ever win
    ],
)
def test_evaluator_selects_best_epoch_in_its_direction(tiny, tmp_path, scores, greater, best):
    evaluator = Scripted(scores, greater)
    out = run(tiny, tmp_path, tiny_config(epochs=3), evaluator=evaluator)
    assert torch.equal(weights(out), evaluator.seen[best])
    assert json.loads((out / "config.json").read_text())["provenance"]["best_epoch"] == best
    assert "dev_error" in (tmp_path / "w" / "train_log.tsv").read_text().splitlines()[0]


def cli_args(tiny, tmp_path, *extra) -> list[str]:
    paths = ["--h5", tiny["h5"], "--spm", tiny["spm"], "--model-dir", tmp_path / "m"]
    return ["train", *map(str, [*paths, "--work-dir", tmp_path / "w", *extra])]


def test_cli_train_with_config_file(tiny, tmp_path, capsys):
    from psp.cli import main

    config = tmp_path / "train.yaml"
    config.write_text("dim: 16\nbatch_size: 32\nmegabatch_size: 2\nthreads: 1\n")
    argv = cli_args(tiny, tmp_path, "--config", config, "--no-eval")
    assert main([*argv, "--epochs", "1", "--grad-clip", "none"]) == 0
    assert weights(tmp_path / "m").shape[1] == 16
    provenance = json.loads((tmp_path / "m" / "config.json").read_text())["provenance"]
    assert provenance["train_config"]["grad_clip"] is None
    assert provenance["best_epoch"] is None  # --no-eval
    config.write_text("dim: 16\nbatchsize: 32\n")
    assert main(argv) == 2  # unknown key → clear error, not a traceback
    config.write_text("dim: 16\nmargin: -1\n")
    assert main(argv) == 2
    assert f"{config}: margin: expected a finite number >= 0, got -1" in capsys.readouterr().err


def test_cli_train_selects_on_stsb_dev_by_default(tiny, tmp_path, shared_data, capsys):
    from psp.cli import main

    argv = cli_args(tiny, tmp_path, "--dim", "16", "--epochs", "2", "--threads", "1")
    assert main([*argv, "--data", str(tmp_path / "nowhere")]) == 2
    assert "STS Benchmark not found" in capsys.readouterr().err
    assert main([*argv, "--data", str(shared_data)]) == 0
    provenance = json.loads((tmp_path / "m" / "config.json").read_text())["provenance"]
    assert provenance["best_epoch"] in (0, 1)
    assert np.isfinite(provenance["best_metrics"]["stsb_dev_spearman"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("loss", ["margin", "pair_weighting"])
def test_train_on_cuda(tiny, tmp_path, loss):
    out = train(
        tiny_config(device="cuda", epochs=1, loss=loss),
        tiny["h5"],
        tiny["spm"],
        model_dir=tmp_path / "m",
        work_dir=tmp_path / "w",
    )
    assert np.isfinite(weights(out).numpy()).all()


def test_the_learning_curve_is_drawn_at_most_once_a_minute_and_at_the_end(tiny, tmp_path):
    """Every checkpoint writes the log; the curve (half a second of one core, the workers
    waiting) is drawn at the first, then only when a minute has passed, and at the end."""
    import psp.train.loop as loop

    drawn = []
    real = loop.plot_learning_curve

    def counting(rows, out_png, metric=None):
        drawn.append(sum(row["event"] == "epoch" for row in rows))
        real(rows, out_png, metric)

    cfg = tiny_config(epochs=3)
    with mock.patch.object(loop, "plot_learning_curve", counting):
        train(cfg, tiny["h5"], tiny["spm"], model_dir=tmp_path / "m", work_dir=tmp_path / "w")
        # The first checkpoint (ten steps in, no epoch logged yet), then the end of the run.
        assert drawn == [0, 3]
        drawn.clear()
        with mock.patch.object(loop, "CURVE_EVERY_S", 0.0):
            train(cfg, tiny["h5"], tiny["spm"], model_dir=tmp_path / "m2", work_dir=tmp_path / "w2")
        # Every checkpoint (every ten steps and each epoch's end), then the end of the run.
        assert len(drawn) > 9 and drawn == sorted(drawn) and drawn[-2:] == [3, 3]
    log = (tmp_path / "w" / "train_log.tsv").read_text().splitlines()
    assert sum(line.startswith("epoch\t") for line in log) == 3
    assert (tmp_path / "w" / "learning_curve.png").stat().st_size > 1000
