"""Train a P-SP model (mean of SentencePiece embeddings) with mega-batch hard negatives.

Reads top to bottom like a small training script: config, schedule, data stream, model pieces
(pooling, negative mining, loss, one step), checkpoints, the loop.

The method (Wieting et al.): for a pair ``(s, t)`` the loss is
``[δ - cos(s,t) + cos(s,t')]+ + [δ - cos(s,t) + cos(t,s')]+`` where ``t'`` (``s'``) is the target
(source) of the mega-batch most similar to ``s`` (``t``), its own partner excluded. A mega-batch
is ``M`` minibatches, embedded once under ``no_grad`` with the parameters at its start; ``M``
grows by one every ``anneal`` minibatches up to ``megabatch_size`` and is never reset.

Speed: the gradient of a minibatch lives on the few thousand table rows it uses, so each step
gathers those rows once (``index_select``), pools them with ``embedding_bag``, back-propagates
into that small block and hands ``(rows, grad)`` and the gathered rows to a row-sparse Adam
(:mod:`psp.optim`), which updates them in one fused pass and writes them back. Pooling and the
loss carry hand-written backward passes (fewer, larger kernels than autograd's). Negative
mining is one blocked similarity matmul per mega-batch into a reused buffer; it is most of a
mega-batch's time (``2 n² dim`` flops, n = 12,800 pairs at M = 100). Data come from the HDF5
file in contiguous slices, the next mega-batch read in a background thread.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from psp.io import InputError, atomic_open, atomic_path
from psp.optim import DenseAdam, LazyAdam

log = logging.getLogger(__name__)

Evaluator = Callable[[torch.nn.Module], dict[str, float]]

# ---------------------------------------------------------------------------------------------
# Config


@dataclass
class TrainConfig:
    """Training hyperparameters; the defaults are the paper's (ParaNMT setting)."""

    dim: int = 1024
    batch_size: int = 128
    margin: float = 0.4
    megabatch_size: int = 100
    anneal: int = 150
    epochs: int = 25
    lr: float = 1e-3
    dropout: float = 0.0
    grad_clip: float | None = None  # max gradient L2 norm (clip_grad_norm_); None: no clipping
    max_pieces: int | None = None  # truncate sentences at train time; None: as stored
    seed: int = 0
    max_steps: int | None = None  # stop (and export) at the first mega-batch boundary past it
    checkpoint_every: int = 1000  # steps; a checkpoint is written at the next mega-batch end
    log_every: int = 50  # steps between rows of train_log.tsv
    select_best: bool = True  # with an evaluator: export the best epoch, not the last
    sparse: bool = True  # lazy row-sparse Adam; False: dense torch.optim.Adam (baseline)
    device: str = "cpu"
    threads: int | None = None  # torch intra-op threads; None: torch's default
    mine_block: int = 1024  # rows of the mega-batch similarity matrix computed at once
    # torch threads for the minibatch steps on CPU; None: as many as for mining. Their ops are
    # too small to split: on 2 cores, 100 steps took 3.66 s with 2 threads, ~3.1 s with 1.
    step_threads: int | None = 1

    # Must match on resume: they fix the parameter shapes or the data order.
    RESUME_FIXED = ("dim", "batch_size", "megabatch_size", "anneal", "seed", "max_pieces", "sparse")

    @classmethod
    def from_dict(cls, values: dict) -> TrainConfig:
        """Build from a dict (YAML/JSON); an unknown key is an error that names it."""
        known = {f.name for f in dataclasses.fields(cls)}
        for key in values:
            if key not in known:
                raise ValueError(f"unknown training config key {key!r} (known: {sorted(known)})")
        return cls(**values)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


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


def megabatch_size_at(step: int, anneal: int, cap: int) -> int:
    """Mega-batch size (in minibatches) for the mega-batch starting at global ``step``."""
    return min(cap, 1 + step // anneal)


# ---------------------------------------------------------------------------------------------
# Data: an epoch is the HDF5 file read as cap-sized contiguous blocks in a shuffled order


@dataclass
class Bags:
    """Sentences as flat piece ids + offsets (``n + 1``), both ``int64`` tensors."""

    ids: torch.Tensor
    offsets: torch.Tensor

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def select(self, index: torch.Tensor) -> Bags:
        """The sentences ``index`` (any order, repeats allowed), without a Python loop."""
        starts = self.offsets[index]
        lengths = self.offsets[index + 1] - starts
        offsets = torch.zeros(len(index) + 1, dtype=torch.int64, device=self.ids.device)
        torch.cumsum(lengths, 0, out=offsets[1:])
        shift = torch.repeat_interleave(starts - offsets[:-1], lengths)
        positions = torch.arange(int(offsets[-1]), device=self.ids.device) + shift
        return Bags(self.ids[positions], offsets)

    def slice(self, lo: int, hi: int) -> Bags:
        """Sentences ``lo:hi`` as views (no gather)."""
        offsets = self.offsets[lo : hi + 1]
        return Bags(self.ids[int(offsets[0]) : int(offsets[-1])], offsets - offsets[0])

    def to(self, device: str | torch.device) -> Bags:
        return Bags(self.ids.to(device), self.offsets.to(device))


def concat_bags(parts: list[Bags]) -> Bags:
    ids = torch.cat([p.ids for p in parts])
    shifts = np.cumsum([0] + [len(p.ids) for p in parts[:-1]])
    offsets = torch.cat(
        [parts[0].offsets[:1]] + [p.offsets[1:] + int(s) for p, s in zip(parts, shifts)]
    )
    return Bags(ids, offsets)


def _truncate(ids: np.ndarray, offsets: np.ndarray, max_pieces: int | None) -> Bags:
    ids = torch.from_numpy(np.asarray(ids, dtype=np.int64))
    offsets = torch.from_numpy(np.asarray(offsets, dtype=np.int64))
    bags = Bags(ids, offsets)
    if max_pieces is None or len(bags) == 0:
        return bags
    lengths = offsets[1:] - offsets[:-1]
    if int(lengths.max()) <= max_pieces:
        return bags
    keep = torch.arange(len(ids)) - torch.repeat_interleave(offsets[:-1], lengths)
    new_lengths = lengths.clamp(max=max_pieces)
    new_offsets = torch.zeros_like(offsets)
    torch.cumsum(new_lengths, 0, out=new_offsets[1:])
    return Bags(ids[keep < max_pieces], new_offsets)


class EpochStream:
    """One epoch's order: the file cut in blocks of ``block`` pairs, blocks permuted.

    The data are shuffled on disk, so shuffling block order keeps every read contiguous (at
    most two slices per mega-batch) while still changing mega-batch composition per epoch.
    """

    def __init__(self, reader, order: list[int], block: int, max_pieces: int | None):
        self.reader, self.order, self.block, self.max_pieces = reader, order, block, max_pieces
        n = len(reader)
        starts = np.array(order, dtype=np.int64) * block
        self.starts = starts
        self.lengths = np.minimum(starts + block, n) - starts
        self.cum = np.concatenate([[0], np.cumsum(self.lengths)])

    def __len__(self) -> int:
        return int(self.cum[-1])

    def read(self, start: int, stop: int) -> tuple[Bags, Bags]:
        """Pairs ``[start, stop)`` of the epoch stream as ``(src, tgt)``."""
        src, tgt = [], []
        for k in range(len(self.order)):
            lo, hi = max(start, self.cum[k]), min(stop, self.cum[k + 1])
            if lo >= hi:
                continue
            disk = int(self.starts[k] - self.cum[k])
            batch = self.reader.read(int(lo) + disk, int(hi) + disk)
            src.append(_truncate(batch.src_ids, batch.src_offsets, self.max_pieces))
            tgt.append(_truncate(batch.tgt_ids, batch.tgt_offsets, self.max_pieces))
        return concat_bags(src), concat_bags(tgt)


def plan_megabatches(
    n_pairs: int, pos: int, step: int, cfg: TrainConfig
) -> Iterator[tuple[int, int, int]]:
    """Yield ``(start, stop, step_at_start)`` of the rest of an epoch, from stream ``pos``.

    A tail of fewer than two pairs is dropped: it has no negative to mine.
    """
    while n_pairs - pos >= 2:
        m = megabatch_size_at(step, cfg.anneal, cfg.megabatch_size)
        stop = min(n_pairs, pos + m * cfg.batch_size)
        yield pos, stop, step
        step += math.ceil((stop - pos) / cfg.batch_size)
        pos = stop


# ---------------------------------------------------------------------------------------------
# Model pieces


class _MeanPool(torch.autograd.Function):
    """``embedding_bag(mode="mean")`` whose backward is itself an ``embedding_bag``.

    The gradient of row ``r`` is the sum, over the tokens that use ``r``, of their bag's
    output gradient divided by the bag length: a sum pooling of the scaled output gradients
    with the tokens grouped by row. Computed that way (one sort of the token ids) it writes
    each gradient row once, about twice as fast on the CPU as ``embedding_bag``'s own
    backward, which zero-fills the whole gradient and scatter-adds token by token.
    """

    @staticmethod
    def forward(ctx, table: torch.Tensor, ids: torch.Tensor, offsets: torch.Tensor):
        ctx.save_for_backward(ids, offsets)
        ctx.n_rows = len(table)
        return F.embedding_bag(ids, table, offsets[:-1], mode="mean")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        ids, offsets = ctx.saved_tensors
        lengths = offsets[1:] - offsets[:-1]
        bag = torch.repeat_interleave(torch.arange(len(lengths), device=ids.device), lengths)
        order = torch.argsort(ids, stable=True)
        starts = torch.zeros(ctx.n_rows, dtype=torch.int64, device=ids.device)
        torch.cumsum(torch.bincount(ids, minlength=ctx.n_rows)[:-1], 0, out=starts[1:])
        per_token = grad / lengths.clamp(min=1).to(grad.dtype).unsqueeze(1)
        return F.embedding_bag(bag[order], per_token, starts, mode="sum"), None, None


def pool(
    table: torch.Tensor,
    bags: Bags,
    dropout: float = 0.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Mean of the rows of ``table`` for each bag; dropout (if any) on the piece embeddings."""
    if dropout <= 0:
        return _MeanPool.apply(table, bags.ids, bags.offsets)
    tokens = table[bags.ids]
    keep = torch.rand(tokens.shape, generator=generator, device=tokens.device) >= dropout
    tokens = tokens * keep / (1 - dropout)
    lengths = bags.offsets[1:] - bags.offsets[:-1]
    segment = torch.repeat_interleave(torch.arange(len(bags), device=tokens.device), lengths)
    sums = torch.zeros(len(bags), table.shape[1], device=tokens.device, dtype=tokens.dtype)
    return sums.index_add_(0, segment, tokens) / lengths.unsqueeze(1)


@torch.no_grad()
def embed_bags(table: torch.Tensor, bags: Bags, chunk: int = 8192) -> torch.Tensor:
    """L2-normalized embeddings of all bags (no gradient, no dropout), in chunks."""
    out = torch.empty(len(bags), table.shape[1], dtype=table.dtype, device=table.device)
    for lo in range(0, len(bags), chunk):
        part = bags.slice(lo, min(lo + chunk, len(bags)))
        out[lo : lo + len(part)] = F.normalize(pool(table, part), dim=1)
    return out


@torch.no_grad()
def mine_negatives(
    src: torch.Tensor, tgt: torch.Tensor, block: int = 1024
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hardest in-mega-batch negatives from one similarity matrix, own partner masked.

    Args:
        src, tgt: ``(n, dim)`` L2-normalized embeddings, row ``i`` of each forming pair ``i``
            (``n >= 2``).
        block: rows of ``src @ tgt.T`` held at once (memory ``block * n`` floats).

    Returns:
        ``(neg_tgt, neg_src)``: ``neg_tgt[i] = argmax_{j != i} cos(src_i, tgt_j)`` and
        ``neg_src[j] = argmax_{i != j} cos(tgt_j, src_i)`` (ties: the lowest index).

    The matmul is the cost (2 n² dim flops); around it, one buffer is reused for every block
    (no page faults on a fresh 50 MB each time) and the column argmax, a slow strided
    reduction, is only taken for the columns whose best value this block improves: after
    the first block that is a small, shrinking fraction (``amax`` finds them cheaply).
    """
    n = len(src)
    if n < 2:
        raise ValueError("mining negatives needs at least two pairs")
    neg_tgt = torch.empty(n, dtype=torch.int64, device=src.device)
    buffer = torch.empty(min(block, n), n, dtype=src.dtype, device=src.device)
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        sims = torch.mm(src[lo:hi], tgt.T, out=buffer[: hi - lo])
        sims.diagonal(offset=lo).fill_(-math.inf)
        torch.argmax(sims, dim=1, out=neg_tgt[lo:hi])
        if lo == 0:  # every column improves on nothing
            best_src, neg_src = sims.max(dim=0)
            continue
        value = sims.amax(dim=0)
        better = torch.nonzero(value > best_src).squeeze(1)
        best_src[better] = value[better]
        neg_src[better] = sims.index_select(1, better).argmax(dim=0) + lo
    return neg_tgt, neg_src


def margin_loss(
    s: torch.Tensor, t: torch.Tensor, t_neg: torch.Tensor, s_neg: torch.Tensor, margin: float
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


def unique_rows(ids: torch.Tensor, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.unique(ids, return_inverse=True)`` for ids in ``[0, vocab)``, without a sort:
    a presence mask over the vocabulary and a lookup table, linear in ``vocab + len(ids)``."""
    present = torch.zeros(vocab, dtype=torch.bool, device=ids.device)
    present[ids] = True
    rows = torch.nonzero(present).squeeze(1)
    lookup = torch.empty(vocab, dtype=torch.int64, device=ids.device)
    lookup[rows] = torch.arange(len(rows), device=ids.device)
    return rows, lookup[ids]


def train_step(
    table: torch.Tensor,
    optimizer: LazyAdam | DenseAdam,
    src: Bags,
    tgt: Bags,
    neg_tgt: torch.Tensor,
    neg_src: torch.Tensor,
    pairs: torch.Tensor,
    cfg: TrainConfig,
    generator: torch.Generator | None = None,
) -> float:
    """One minibatch update on mega-batch ``pairs`` with their mined negatives; returns the loss.

    Only the unique rows used by the minibatch (its pairs and their negatives) take part in
    autograd, so the gradient comes out coalesced, ``(rows, dim)``; clipping on it sees the
    same norm a dense gradient would have.
    """
    b = len(pairs)
    sources = src.select(torch.cat([pairs, neg_src[pairs]]))
    targets = tgt.select(torch.cat([pairs, neg_tgt[pairs]]))
    both = concat_bags([sources, targets])
    rows, local = unique_rows(both.ids, len(table))
    block = table.index_select(0, rows).requires_grad_()
    emb = pool(block, Bags(local, both.offsets), cfg.dropout, generator)
    s, s_neg, t, t_neg = emb.split(b)
    loss = margin_loss(s, t, t_neg, s_neg, cfg.margin)
    loss.backward()
    grad = block.grad
    if cfg.grad_clip is not None:
        norm = torch.linalg.vector_norm(grad)
        grad.mul_(torch.clamp(cfg.grad_clip / (norm + 1e-6), max=1.0))
    optimizer.step(rows, grad, values=block.detach())
    return float(loss.detach())


@torch.no_grad()
def pair_metrics(
    table: torch.Tensor, src: Bags, tgt: Bags, margin: float = 0.4, batch: int = 128
) -> dict[str, float]:
    """Held-out quality: the training loss with in-batch negatives, and in-batch retrieval.

    For consecutive batches of ``batch`` pairs, negatives are mined inside the batch (as in a
    mega-batch of one minibatch); ``accuracy`` is the fraction of sources whose nearest target
    in the batch is their own partner.
    """
    src, tgt = src.to(table.device), tgt.to(table.device)
    losses, hits, count = [], 0, 0
    for lo in range(0, len(src), batch):
        hi = min(len(src), lo + batch)
        if hi - lo < 2:
            break
        s, t = embed_bags(table, src.slice(lo, hi)), embed_bags(table, tgt.slice(lo, hi))
        neg_tgt, neg_src = mine_negatives(s, t)
        losses.append(float(margin_loss(s, t, t[neg_tgt], s[neg_src], margin)) * (hi - lo))
        own = torch.arange(hi - lo, device=s.device)
        hits += int(((s @ t.T).argmax(dim=1) == own).sum())
        count += hi - lo
    return {"loss": sum(losses) / count, "accuracy": hits / count}


# ---------------------------------------------------------------------------------------------
# Checkpoints: tensors in safetensors, everything else in JSON, the JSON written last


def _write_json(path: Path, data: dict) -> None:
    with atomic_open(path, "wt") as fh:
        json.dump(data, fh, indent=1)


def _save_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    with atomic_path(path) as tmp:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp))


@dataclass
class TrainState:
    """Counters that, with the tensors, make a run resumable exactly."""

    step: int = 0
    epoch: int = 0
    pos: int = 0  # pairs of the current epoch stream already consumed
    epoch_order: list[int] = dataclasses.field(default_factory=list)
    rng: dict = dataclasses.field(default_factory=dict)  # numpy Generator state
    epoch_loss: float = 0.0  # sum of step losses so far in this epoch
    epoch_steps: int = 0
    elapsed: float = 0.0
    last_loss: float = float("nan")
    best_score: float | None = None
    best_epoch: int | None = None
    best_metrics: dict = dataclasses.field(default_factory=dict)


class Checkpointer:
    """``work_dir/checkpoints/``: ``state.json`` names the current ``state-<step>.safetensors``."""

    def __init__(self, work_dir: Path):
        self.dir = Path(work_dir) / "checkpoints"
        self.meta = self.dir / "state.json"
        self.best = self.dir / "best.safetensors"

    def save(self, state: TrainState, tensors: dict[str, torch.Tensor], extra: dict) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"state-{state.step:09d}.safetensors"
        _save_tensors(self.dir / name, tensors)
        _write_json(self.meta, {"tensors": name, "state": dataclasses.asdict(state), **extra})
        for old in self.dir.glob("state-*.safetensors"):
            if old.name != name:
                old.unlink()

    def load(self) -> tuple[TrainState, dict[str, torch.Tensor], dict]:
        if not self.meta.exists():
            raise InputError(f"{self.meta}: no checkpoint to resume from")
        meta = json.loads(self.meta.read_text())
        tensors = load_file(str(self.dir / meta["tensors"]))
        return TrainState(**meta.pop("state")), tensors, meta


# ---------------------------------------------------------------------------------------------
# Log and learning curve

LOG_COLUMNS = ["event", "step", "epoch", "loss", "pairs_per_s", "megabatch", "elapsed"]


def _write_log(path: Path, rows: list[dict]) -> None:
    extra = sorted({k for row in rows for k in row} - set(LOG_COLUMNS))
    with atomic_open(path, "wt") as fh:
        writer = csv.DictWriter(fh, LOG_COLUMNS + extra, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _read_log(path: Path, up_to_step: int) -> list[dict]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [
        {k: v for k, v in row.items() if v != ""} for row in rows if int(row["step"]) <= up_to_step
    ]


def plot_learning_curve(rows: list[dict], out_png: Path, metric: str | None = None) -> None:
    """Training loss against step, and an evaluation metric per epoch when there is one
    (``metric``, else the first evaluation column of the log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = metric or next((k for r in rows for k in r if k not in LOG_COLUMNS), None)
    steps = [int(r["step"]) for r in rows if r["event"] == "step"]
    loss = [float(r["loss"]) for r in rows if r["event"] == "step"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, loss, color="tab:blue", label="train loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    evals = [r for r in rows if r["event"] == "epoch" and metric and metric in r]
    if evals:
        ax2 = ax.twinx()
        ax2.plot(
            [int(r["step"]) for r in evals],
            [float(r[metric]) for r in evals],
            "o-",
            color="tab:orange",
            label=metric,
        )
        ax2.set_ylabel(metric)
    ax.set_title("P-SP training")
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# The loop


def train(
    cfg: TrainConfig,
    h5_path: str | os.PathLike,
    spm_path: str | os.PathLike,
    model_dir: str | os.PathLike,
    work_dir: str | os.PathLike,
    resume: bool = False,
    evaluator: Evaluator | None = None,
    on_step: Callable[[int], None] | None = None,
) -> Path:
    """Train on ``h5_path`` and export the model directory; returns ``model_dir``.

    Args:
        cfg: hyperparameters.
        h5_path: training pairs (DESIGN §4 layout), written with the SentencePiece ``spm_path``.
        model_dir: output model (``config.json``, ``sentencepiece.model``,
            ``embeddings.safetensors``) with provenance.
        work_dir: ``train_log.tsv``, ``learning_curve.png``, ``checkpoints/``.
        resume: continue from the last checkpoint in ``work_dir`` (fixed fields must match).
        evaluator: ``evaluator(model) -> dict[str, float]`` run after each epoch; its first key
            (or ``primary_metric`` attribute) selects the best epoch when ``cfg.select_best``.
        on_step: called with the global step after every update (progress hooks, tests).
    """
    from psp.hdf5 import PairReader
    from psp.model import PSPModel

    work_dir, model_dir = Path(work_dir), Path(model_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = torch.device(cfg.device)
    reader = PairReader(h5_path)
    n_pairs = len(reader)
    model = PSPModel.from_spm(
        spm_path,
        dim=cfg.dim,
        seed=cfg.seed,
        languages=reader.attrs["languages"],
        max_pieces=cfg.max_pieces or reader.attrs.get("max_pieces"),
    )
    spm_sha = model.encoder.sha256
    if reader.attrs["spm_sha256"] != spm_sha:
        raise InputError(f"{h5_path}: written with another SentencePiece model than {spm_path}")
    model.to(device)
    table = model.embedding.weight.data
    optimizer = (LazyAdam if cfg.sparse else DenseAdam)(table, lr=cfg.lr)
    generator = torch.Generator(device=device)
    generator.manual_seed(cfg.seed)
    fixed = {"vocab_size": int(table.shape[0]), "spm_sha256": spm_sha, "n_pairs": n_pairs}

    ckpt = Checkpointer(work_dir)
    state = TrainState(rng=np.random.default_rng(cfg.seed).bit_generator.state)
    if resume:
        state, tensors, meta = ckpt.load()
        _check_resume(cfg, TrainConfig.from_dict(meta["config"]), fixed, meta["fixed"], ckpt.meta)
        table.copy_(tensors["embedding"])
        optimizer.load_state_tensors(tensors)
        generator.set_state(tensors["torch_rng"])
        log.info("resuming from step %d (epoch %d, pair %d)", state.step, state.epoch, state.pos)
    # The checkpoint keeps its own copy of the log: a workflow deletes a job's outputs
    # (work_dir/train_log.tsv among them) before it reruns the job that resumes.
    rows = _read_log(ckpt.dir / "train_log.tsv", state.step) if resume else []
    metric = getattr(evaluator, "primary_metric", None)

    def checkpoint() -> None:
        tensors = {"embedding": table, **optimizer.state_tensors()}
        tensors["torch_rng"] = generator.get_state()
        ckpt.save(state, tensors, {"config": cfg.to_dict(), "fixed": fixed})
        _write_log(ckpt.dir / "train_log.tsv", rows)
        _write_log(work_dir / "train_log.tsv", rows)

    block = cfg.megabatch_size * cfg.batch_size
    n_blocks = math.ceil(n_pairs / block)
    bar = tqdm(
        total=cfg.epochs * n_pairs,
        initial=state.epoch * n_pairs + state.pos,
        unit="pair",
        disable=None,
        dynamic_ncols=True,
    )
    window = {"loss": 0.0, "steps": 0, "pairs": 0, "t0": time.perf_counter()}
    stopped = False
    pool_ = ThreadPoolExecutor(max_workers=1)
    try:
        while state.epoch < cfg.epochs and not stopped:
            if state.pos == 0:
                rng = np.random.default_rng()
                rng.bit_generator.state = state.rng
                state.epoch_order = rng.permutation(n_blocks).tolist()
                state.rng = rng.bit_generator.state
            stream = EpochStream(reader, state.epoch_order, block, cfg.max_pieces)
            epoch_t0, epoch_pos = time.perf_counter(), state.pos
            plan = list(plan_megabatches(len(stream), state.pos, state.step, cfg))
            future = pool_.submit(stream.read, *plan[0][:2]) if plan else None
            for i, (start, stop, step0) in enumerate(plan):
                t0 = time.perf_counter()
                src, tgt = future.result()
                if i + 1 < len(plan):
                    future = pool_.submit(stream.read, *plan[i + 1][:2])
                src, tgt = src.to(device), tgt.to(device)
                m = megabatch_size_at(state.step, cfg.anneal, cfg.megabatch_size)
                neg_tgt, neg_src = mine_negatives(
                    embed_bags(table, src), embed_bags(table, tgt), cfg.mine_block
                )
                with torch_threads(cfg.step_threads if device.type == "cpu" else None):
                    for lo in range(0, stop - start, cfg.batch_size):
                        pairs = torch.arange(
                            lo, min(stop - start, lo + cfg.batch_size), device=device
                        )
                        loss = train_step(
                            table, optimizer, src, tgt, neg_tgt, neg_src, pairs, cfg, generator
                        )
                        state.step += 1
                        window["loss"] += loss
                        window["steps"] += 1
                        window["pairs"] += len(pairs)
                        state.epoch_loss += loss
                        state.epoch_steps += 1
                        if on_step is not None:
                            on_step(state.step)
                        if state.step % cfg.log_every == 0:
                            _log_window(rows, window, state, m, bar)
                state.pos = stop
                state.elapsed += time.perf_counter() - t0
                bar.update(stop - start)
                crossed = state.step // cfg.checkpoint_every > step0 // cfg.checkpoint_every
                stopped = cfg.max_steps is not None and state.step >= cfg.max_steps
                if crossed and not stopped and i + 1 < len(plan):
                    checkpoint()
                if stopped:
                    break
            if not stopped:
                _end_epoch(
                    state,
                    rows,
                    epoch_t0,
                    len(stream) - epoch_pos,
                    model,
                    evaluator,
                    metric,
                    cfg,
                    ckpt,
                    table,
                )
            checkpoint()
            plot_learning_curve(rows, work_dir / "learning_curve.png", metric)
    finally:
        pool_.shutdown(wait=True)
        bar.close()
        reader.close()
    # Also when a resumed run had nothing left to do: the log and curve are outputs too.
    _write_log(work_dir / "train_log.tsv", rows)
    plot_learning_curve(rows, work_dir / "learning_curve.png", metric)

    if cfg.select_best and state.best_epoch is not None and ckpt.best.exists():
        table.copy_(load_file(str(ckpt.best))["embedding"])
    model.config.provenance = {
        **model.config.provenance,
        "h5": {"path": str(h5_path), **reader.attrs},
        "train_config": cfg.to_dict(),
        "steps": state.step,
        "epochs": state.epoch,
        "final_loss": state.last_loss,
        "best_epoch": state.best_epoch,
        "best_metrics": state.best_metrics,
    }
    model.cpu().save(model_dir)
    return model_dir


def _log_window(rows: list[dict], window: dict, state: TrainState, m: int, bar) -> None:
    now = time.perf_counter()
    loss = window["loss"] / max(1, window["steps"])
    rate = window["pairs"] / max(1e-9, now - window["t0"])
    state.last_loss = loss
    rows.append(
        {
            "event": "step",
            "step": state.step,
            "epoch": state.epoch,
            "loss": f"{loss:.5f}",
            "pairs_per_s": f"{rate:.1f}",
            "megabatch": m,
            "elapsed": f"{state.elapsed:.1f}",
        }
    )
    bar.set_postfix(loss=f"{loss:.4f}", pairs_s=f"{rate:.0f}", M=m)
    window.update(loss=0.0, steps=0, pairs=0, t0=now)


def _end_epoch(state, rows, t0, n, model, evaluator, metric, cfg, ckpt, table) -> None:
    """Close an epoch: log row, evaluation, best-model bookkeeping, next epoch's counters."""
    loss = state.epoch_loss / max(1, state.epoch_steps)
    state.last_loss = loss
    row = {
        "event": "epoch",
        "step": state.step,
        "epoch": state.epoch,
        "loss": f"{loss:.5f}",
        "pairs_per_s": f"{n / max(1e-9, time.perf_counter() - t0):.1f}",
        "megabatch": megabatch_size_at(state.step, cfg.anneal, cfg.megabatch_size),
        "elapsed": f"{state.elapsed:.1f}",
    }
    if evaluator is not None:
        model.eval()
        metrics = {k: float(v) for k, v in evaluator(model).items()}
        model.train()
        row.update({k: f"{v:.5f}" for k, v in metrics.items()})
        key = metric if metric in metrics else next(iter(metrics))
        if state.best_score is None or metrics[key] > state.best_score:
            state.best_score, state.best_epoch, state.best_metrics = (
                metrics[key],
                state.epoch,
                metrics,
            )
            if cfg.select_best:
                ckpt.dir.mkdir(parents=True, exist_ok=True)
                _save_tensors(ckpt.best, {"embedding": table})
        log.info("epoch %d: loss %.4f %s", state.epoch, loss, metrics)
    rows.append(row)
    state.epoch += 1
    state.pos, state.epoch_loss, state.epoch_steps = 0, 0.0, 0


def _check_resume(cfg: TrainConfig, old: TrainConfig, fixed: dict, old_fixed: dict, where) -> None:
    for name in TrainConfig.RESUME_FIXED:
        if getattr(cfg, name) != getattr(old, name):
            raise InputError(
                f"{where}: cannot resume, {name}={getattr(old, name)!r} in the checkpoint "
                f"but {getattr(cfg, name)!r} now"
            )
    for name, value in fixed.items():
        if old_fixed.get(name) != value:
            raise InputError(
                f"{where}: cannot resume, {name}={old_fixed.get(name)!r} in the checkpoint "
                f"but {value!r} now"
            )


def has_checkpoint(
    work_dir: str | os.PathLike, cfg: TrainConfig, h5_path: str | os.PathLike
) -> bool:
    """Whether ``work_dir`` holds a checkpoint that ``train(..., resume=True)`` can continue.

    A checkpoint of another run (different data, SentencePiece model or fixed hyperparameters)
    cannot be continued; it is removed with a warning so that a workflow rerun after a changed
    config starts clean instead of failing, while a crashed run of the same config resumes.
    """
    from psp.hdf5 import PairReader

    ckpt = Checkpointer(Path(work_dir))
    if not ckpt.meta.exists():
        return False
    meta = json.loads(ckpt.meta.read_text())
    with PairReader(h5_path) as reader:
        attrs = reader.attrs
        fixed = {"spm_sha256": attrs["spm_sha256"], "n_pairs": len(reader)}
    old_fixed = {key: meta["fixed"].get(key) for key in fixed}
    try:
        _check_resume(cfg, TrainConfig.from_dict(meta["config"]), fixed, old_fixed, ckpt.meta)
    except InputError as err:
        log.warning("%s; starting from scratch", err)
        shutil.rmtree(ckpt.dir)
        return False
    return True
