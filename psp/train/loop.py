"""The training loop: epochs of mega-batches, each mined once and then stepped minibatch by
minibatch, with checkpoints, a log, per-epoch evaluation and the export of the model.

Reads like a textbook loop: :meth:`Trainer.run` walks epochs, :meth:`Trainer.train_epoch`
walks the epoch's mega-batches (read in the background), :meth:`Trainer.train_megabatch` mines
negatives (for the margin loss) and takes the steps, :meth:`Trainer.end_epoch` evaluates and
keeps the best epoch. :class:`psp.train.parallel.ParallelTrainer` trains the same mega-batches
with several workers; :func:`psp.train.run.train` picks one.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file
from tqdm.auto import tqdm

from psp.io import InputError
from psp.train.bags import Bags
from psp.train.checkpoint import Checkpointer, TrainState, data_identity, save_tensors
from psp.train.config import TrainConfig, megabatch_size_at
from psp.train.data import EpochOrder, EpochStream, megabatch_windows, prefetched
from psp.train.log import TrainLog, plot_learning_curve
from psp.train.optim import DenseAdam, LazyAdam
from psp.train.selection import ModelScorer, improves, primary_score
from psp.train.step import PhaseTimes, train_megabatch

log = logging.getLogger(__name__)

#: Seconds between drawings of the learning curve while a run trains; the end of the run always
#: draws it. A drawing takes about half a second on one core while the workers wait, and the
#: default run's trainings checkpoint about 340 times.
CURVE_EVERY_S = 60.0


class Trainer:
    """One training run over ``h5_path`` (pairs written with the SentencePiece ``spm_path``),
    writing ``train_log.tsv``, ``learning_curve.png`` and ``checkpoints/`` into ``work_dir``."""

    def __init__(
        self,
        cfg: TrainConfig,
        h5_path: str | os.PathLike,
        spm_path: str | os.PathLike,
        *,
        work_dir: str | os.PathLike,
        evaluator: ModelScorer | None = None,
        on_step: Callable[[int], None] | None = None,
    ):
        from psp.data.pairs_store import PairReader
        from psp.model.torch_model import PSPModel

        self.cfg, self.evaluator, self.on_step = cfg, evaluator, on_step
        self.h5_path, self.work_dir = Path(h5_path), Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.device = torch.device(cfg.device)
        self.reader = PairReader(h5_path)
        try:
            self.model = PSPModel.from_spm(
                spm_path,
                dim=cfg.dim,
                seed=cfg.seed,
                languages=self.reader.attrs["languages"],
                max_pieces=cfg.max_pieces or self.reader.attrs.get("max_pieces"),
            )
            if self.reader.attrs["spm_sha256"] != self.model.encoder.sha256:
                raise InputError(
                    f"{h5_path}: written with another SentencePiece model than {spm_path}"
                )
        except BaseException:
            self.reader.close()
            raise
        self.model.to(self.device)
        self.table = self.model.embedding.weight.data
        self.optimizer = (LazyAdam if cfg.sparse else DenseAdam)(self.table, lr=cfg.lr)
        self.generator = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.fixed = {"vocab_size": len(self.table), **data_identity(self.reader)}
        self.ckpt = Checkpointer(self.work_dir)
        self.state = TrainState()
        self.log = TrainLog()
        self.times = PhaseTimes()
        self.epoch_times = PhaseTimes()  # self.times at the last epoch's end
        self.megabatch = 1
        self.step_rate: float | None = None  # pairs/s measured by a parallel run (None: timed here)
        self.stopped = False
        self.curve_drawn = -float("inf")  # time.monotonic() of the last drawing
        if cfg.select_best and evaluator is None:
            log.warning("select_best without an evaluator: the last epoch will be exported")

    def resume(self) -> None:
        """Continue from the checkpoint in ``work_dir`` (its fixed fields must match)."""
        self.state, tensors = self.ckpt.load(self.cfg, self.fixed)
        self.table.copy_(tensors["embedding"])
        self.optimizer.load_state_tensors(tensors)
        self.generator.set_state(tensors["torch_rng"])
        # The checkpoint keeps its own copy of the log: a workflow deletes a job's outputs
        # (work_dir/train_log.tsv among them) before it reruns the job that resumes.
        self.log = TrainLog.read(self.ckpt.dir / "train_log.tsv", self.state.step)
        state = self.state
        log.info("resuming from step %d (epoch %d, pair %d)", state.step, state.epoch, state.pos)

    def run(self) -> None:
        n = len(self.reader)
        done = self.state.epoch * n + self.state.pos
        with tqdm(
            total=self.cfg.epochs * n, initial=done, unit="pair", disable=None, dynamic_ncols=True
        ) as self.bar:
            while self.state.epoch < self.cfg.epochs and not self.stopped:
                self.train_epoch()
        # Also when a resumed run had nothing left to do: the log and curve are outputs too.
        self.write_log(final=True)

    def train_epoch(self) -> None:
        cfg, state = self.cfg, self.state
        window = cfg.megabatch_size * cfg.batch_size
        order = EpochOrder(len(self.reader), seed=cfg.seed, epoch=state.epoch, window_pairs=window)
        stream = EpochStream(self.reader, order, cfg.max_pieces)
        windows = list(megabatch_windows(len(stream), state.pos, state.step, cfg))
        t0, first = time.perf_counter(), state.pos
        with prefetched(stream.read, [(start, stop) for start, stop, _ in windows]) as batches:
            for start, stop, step0 in windows:
                waited = time.perf_counter()
                src, tgt = next(batches)
                self.times.data += time.perf_counter() - waited
                self.train_megabatch(src.to(self.device), tgt.to(self.device))
                state.pos = stop
                self.bar.update(stop - start)
                self.stopped = cfg.max_steps is not None and state.step >= cfg.max_steps
                if self.stopped:
                    break
                crossed = state.step // cfg.checkpoint_every > step0 // cfg.checkpoint_every
                if crossed and stop < windows[-1][1]:
                    self.checkpoint()
        if not self.stopped:
            self.end_epoch(pairs_per_s=(len(stream) - first) / (time.perf_counter() - t0))
        self.checkpoint()

    def train_megabatch(self, src: Bags, tgt: Bags) -> None:
        t0 = time.perf_counter()
        self.megabatch = megabatch_size_at(
            self.state.step, self.cfg.anneal, self.cfg.megabatch_size
        )
        train_megabatch(
            self.table,
            self.optimizer,
            src,
            tgt,
            cfg=self.cfg,
            first_step=self.state.step,
            generator=self.generator,
            times=self.times,
            on_step=self.record_step,
        )
        self.state.elapsed += time.perf_counter() - t0

    def record_step(self, loss: float, pairs: int) -> None:
        """Count one step of the current mega-batch and log it (every ``log_every`` steps)."""
        state = self.state
        state.step += 1
        state.epoch_loss += loss
        state.epoch_steps += 1
        self.log.add_step(loss, pairs)
        if self.on_step is not None:
            self.on_step(state.step)
        if state.step % self.cfg.log_every == 0:
            state.last_loss, rate = self.log.step_row(
                state.step, state.epoch, self.megabatch, state.elapsed, self.step_rate
            )
            self.bar.set_postfix(
                loss=f"{state.last_loss:.4f}", pairs_s=f"{rate:.0f}", M=self.megabatch
            )

    def end_epoch(self, pairs_per_s: float) -> None:
        """Log the epoch, evaluate it and keep it if it is the best so far; next epoch."""
        cfg, state = self.cfg, self.state
        state.last_loss = state.epoch_loss / max(1, state.epoch_steps)
        metrics = self.evaluate() if self.evaluator is not None else {}
        if metrics:
            log.info("epoch %d: loss %.4f %s", state.epoch, state.last_loss, metrics)
            score = primary_score(self.evaluator, metrics)
            if improves(
                score, state.best_score, getattr(self.evaluator, "greater_is_better", True)
            ):
                state.best_score, state.best_epoch, state.best_metrics = score, state.epoch, metrics
                if cfg.select_best:
                    self.ckpt.dir.mkdir(parents=True, exist_ok=True)
                    save_tensors(self.ckpt.best, {"embedding": self.table})
        megabatch = megabatch_size_at(state.step, cfg.anneal, cfg.megabatch_size)
        self.log.append(
            "epoch",
            step=state.step,
            epoch=state.epoch,
            loss=state.last_loss,
            pairs_per_s=pairs_per_s,
            megabatch=megabatch,
            elapsed=state.elapsed,
            metrics=metrics,
            phases=self.times.since(self.epoch_times),
        )
        self.epoch_times = dataclasses.replace(self.times)
        state.epoch += 1
        state.pos, state.epoch_loss, state.epoch_steps = 0, 0.0, 0

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        self.model.eval()
        metrics = {k: float(v) for k, v in self.evaluator(self.model).items()}
        self.model.train()
        return metrics

    def checkpoint(self) -> None:
        tensors = {"embedding": self.table, **self.optimizer.state_tensors()}
        tensors["torch_rng"] = self.generator.get_state()
        self.ckpt.save(self.state, tensors, {"config": self.cfg.to_dict(), "fixed": self.fixed})
        self.log.write(self.ckpt.dir / "train_log.tsv")
        self.write_log()

    def write_log(self, final: bool = False) -> None:
        """Write the log, and draw the learning curve at the end of the run or when
        :data:`CURVE_EVERY_S` have passed since the last drawing."""
        self.log.write(self.work_dir / "train_log.tsv")
        if final or time.monotonic() - self.curve_drawn >= CURVE_EVERY_S:
            metric = getattr(self.evaluator, "primary_metric", None)
            plot_learning_curve(self.log.rows, self.work_dir / "learning_curve.png", metric)
            self.curve_drawn = time.monotonic()

    def export(self, model_dir: str | os.PathLike) -> Path:
        """Save the model (the best epoch's table when selecting) with its provenance."""
        state = self.state
        if self.cfg.select_best and state.best_epoch is not None and self.ckpt.best.exists():
            self.table.copy_(load_file(str(self.ckpt.best))["embedding"])
        self.model.config.provenance = {
            **self.model.config.provenance,
            "h5": {"path": str(self.h5_path), **self.reader.attrs},
            "train_config": self.cfg.to_dict(),
            "steps": state.step,
            "epochs": state.epoch,
            "final_loss": state.last_loss,
            "best_epoch": state.best_epoch,
            "best_metrics": state.best_metrics,
        }
        self.model.cpu().save(model_dir)
        return Path(model_dir)

    def close(self) -> None:
        self.reader.close()
