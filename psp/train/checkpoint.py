"""Checkpoints: tensors in safetensors, counters and config in JSON, the JSON written last.

``work_dir/checkpoints/state.json`` names the current ``state-<step>.safetensors``; both are
written atomically, so a run killed at any point leaves the previous checkpoint or the new
one. Loading reads JSON and safetensors only (nothing is unpickled).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from psp.io import InputError, atomic_open, atomic_path
from psp.train.config import TrainConfig
from psp.train.data import SHUFFLE_BLOCK

log = logging.getLogger(__name__)

#: Names the data order of :mod:`psp.train.data`: a checkpoint of another order cannot resume.
ORDER = f"epoch permutation of {SHUFFLE_BLOCK}-pair blocks"


@dataclass
class TrainState:
    """Counters that, with the tensors, make a run resumable exactly."""

    step: int = 0
    epoch: int = 0
    pos: int = 0  # pairs of the current epoch stream already consumed
    epoch_loss: float = 0.0  # sum of step losses so far in this epoch
    epoch_steps: int = 0
    elapsed: float = 0.0
    last_loss: float = float("nan")
    best_score: float | None = None
    best_epoch: int | None = None
    best_metrics: dict = dataclasses.field(default_factory=dict)


def save_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    with atomic_path(path) as tmp:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp))


def data_identity(reader) -> dict:
    """What a checkpoint must share with the data to be resumed on them."""
    return {"spm_sha256": reader.attrs["spm_sha256"], "n_pairs": len(reader), "order": ORDER}


class Checkpointer:
    """``work_dir/checkpoints/``: ``state.json`` names the current ``state-<step>.safetensors``."""

    def __init__(self, work_dir: Path):
        self.dir = Path(work_dir) / "checkpoints"
        self.meta = self.dir / "state.json"
        self.best = self.dir / "best.safetensors"

    def save(self, state: TrainState, tensors: dict[str, torch.Tensor], extra: dict) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"state-{state.step:09d}.safetensors"
        save_tensors(self.dir / name, tensors)
        with atomic_open(self.meta, "wt") as fh:
            json.dump({"tensors": name, "state": dataclasses.asdict(state), **extra}, fh, indent=1)
        for old in self.dir.glob("state-*.safetensors"):
            if old.name != name:
                old.unlink()

    def read_meta(self) -> dict:
        """``state.json``; ``InputError`` naming it when it is missing or not ours."""
        if not self.meta.exists():
            raise InputError(f"{self.meta}: no checkpoint to resume from")
        try:
            meta = json.loads(self.meta.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as err:
            raise InputError(f"{self.meta}: not a checkpoint state ({err})") from err
        keys = ("tensors", "state", "config", "fixed")
        if not isinstance(meta, dict) or any(key not in meta for key in keys):
            raise InputError(f"{self.meta}: not a checkpoint state (needs keys {list(keys)})")
        return meta

    def load(self, cfg: TrainConfig, fixed: dict) -> tuple[TrainState, dict[str, torch.Tensor]]:
        """The state and tensors of a checkpoint that ``cfg`` and the data can continue."""
        meta = self.read_meta()
        check_resume(cfg, meta, fixed, self.meta)
        tensors = load_file(str(self.dir / meta["tensors"]))
        return TrainState(**meta["state"]), tensors


def check_resume(cfg: TrainConfig, meta: dict, fixed: dict, where: Path) -> None:
    """``InputError`` unless the checkpoint ``meta`` has ``cfg``'s fixed fields and ``fixed``."""
    try:
        old = TrainConfig.from_dict(meta["config"], str(where)).to_dict()
    except (ValueError, TypeError) as err:
        raise InputError(
            f"{where}: cannot resume, its config is not this version's ({err})"
        ) from err
    pairs = [(name, old[name], getattr(cfg, name)) for name in TrainConfig.RESUME_FIXED]
    pairs += [(name, meta["fixed"].get(name), value) for name, value in fixed.items()]
    for name, then, now in pairs:
        if then != now:
            raise InputError(
                f"{where}: cannot resume, {name}={then!r} in the checkpoint but {now!r} now"
            )
    state = meta["state"]
    trained = state.get("epoch", 0) + (state.get("pos", 0) > 0)  # epochs begun
    if trained > cfg.epochs:
        raise InputError(
            f"{where}: cannot resume, the checkpoint has begun {trained} epochs but epochs={cfg.epochs} now"
        )


def has_checkpoint(
    work_dir: str | os.PathLike, cfg: TrainConfig, h5_path: str | os.PathLike
) -> bool:
    """Whether ``work_dir`` holds a checkpoint that ``train(..., resume=True)`` can continue.

    A checkpoint of another run (different data, SentencePiece model, data order or fixed
    hyperparameters) cannot be continued; it is removed with a warning so that a workflow rerun
    after a changed config starts clean instead of failing, while a crashed run of the same
    config resumes.
    """
    from psp.data.pairs_store import PairReader

    ckpt = Checkpointer(Path(work_dir))
    if not ckpt.meta.exists():
        return False
    with PairReader(h5_path) as reader:
        fixed = data_identity(reader)
    try:
        check_resume(cfg, ckpt.read_meta(), fixed, ckpt.meta)
    except InputError as err:
        log.warning("%s; starting from scratch", err)
        shutil.rmtree(ckpt.dir)
        return False
    return True
