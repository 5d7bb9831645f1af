"""The entry point of training: :func:`train` picks the trainer for the job (one process, several
workers, several ranks) and runs it to the exported model."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import torch

from psp.train import distributed
from psp.train.config import TrainConfig
from psp.train.loop import Trainer
from psp.train.parallel import ParallelTrainer, worker_count
from psp.train.selection import ModelScorer


def train(
    cfg: TrainConfig,
    h5_path: str | os.PathLike,
    spm_path: str | os.PathLike,
    *,
    model_dir: str | os.PathLike,
    work_dir: str | os.PathLike,
    resume: bool = False,
    evaluator: ModelScorer | None = None,
    on_step: Callable[[int], None] | None = None,
) -> Path:
    """Train on ``h5_path`` and export the model directory; returns ``model_dir``.

    One worker (``train.workers: 1``) trains in this process (:class:`Trainer`); several, or a
    process started as one of several ranks by ``torchrun`` or ``srun``
    (:func:`psp.train.distributed.world_from_env`), train with
    :class:`~psp.train.parallel.ParallelTrainer`, where rank 0 writes every output and reads
    the checkpoint it resumes from.

    Args:
        cfg: hyperparameters.
        h5_path: training pairs (``docs/design.md`` §4 layout), written with the SentencePiece
            model ``spm_path``.
        model_dir: output model (``config.json``, ``sentencepiece.model``,
            ``embeddings.safetensors``) with provenance.
        work_dir: ``train_log.tsv``, ``learning_curve.png``, ``checkpoints/``.
        resume: continue from the last checkpoint in ``work_dir`` (fixed fields must match).
        evaluator: ``evaluator(model) -> dict[str, float]`` run after each epoch; its
            ``primary_metric`` (else its first key) selects the best epoch when
            ``cfg.select_best``, in the direction of its ``greater_is_better`` (default true).
        on_step: called with the global step after every update (progress hooks, tests).
    """
    world = distributed.world_from_env()
    workers = worker_count(cfg)
    keys = {"work_dir": work_dir, "evaluator": evaluator, "on_step": on_step}
    if world is None and workers == 1:
        return _run(Trainer(cfg, h5_path, spm_path, **keys), resume, model_dir)
    device = torch.device(cfg.device)
    if world is not None and device.type == "cuda":
        device = torch.device("cuda", world.local_rank)
        cfg = TrainConfig.from_dict(cfg.to_dict() | {"device": str(device)})
    if world is not None:
        distributed.start(world, device)
    try:
        trainer = ParallelTrainer(cfg, h5_path, spm_path, workers=workers, world=world, **keys)
        return _run(trainer, distributed.broadcast_object(resume, world), model_dir)
    finally:
        distributed.stop()


def _run(trainer: Trainer, resume: bool, model_dir) -> Path:
    try:
        if resume:
            trainer.resume()
        trainer.run()
        if getattr(trainer, "is_main", True):
            trainer.export(model_dir)
        return Path(model_dir)
    finally:
        trainer.close()
