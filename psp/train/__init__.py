"""Train a P-SP model (mean of SentencePiece embeddings) with mega-batch hard negatives.

The method (Wieting et al.): for a pair ``(s, t)`` the loss is
``[δ - cos(s,t) + cos(s,t')]+ + [δ - cos(s,t) + cos(t,s')]+`` where ``t'`` (``s'``) is the target
(source) of the mega-batch most similar to ``s`` (``t``), its own partner excluded. A mega-batch
is ``M`` minibatches, embedded once under ``no_grad`` with the parameters at its start; ``M``
grows by one every ``anneal`` minibatches up to ``megabatch_size`` and is never reset.
``loss: pair_weighting`` trains with the multi-similarity loss over each minibatch instead
(:mod:`~psp.train.losses`), on the same data order and with the same sparse updates.

One module per concern: :mod:`~psp.train.config` (hyperparameters), :mod:`~psp.train.data`
(the per-epoch shuffle read from the pair store), :mod:`~psp.train.bags` (ragged sentences),
:mod:`~psp.train.ops` (pooling and loss with hand-written backward passes),
:mod:`~psp.train.kernels` (the step's compiled loops),
:mod:`~psp.train.losses` (the objectives: this margin loss or the pair-weighting loss),
:mod:`~psp.train.negatives` (mining), :mod:`~psp.train.step` (one sparse update),
:mod:`~psp.train.optim` (the row-sparse Adam),
:mod:`~psp.train.checkpoint`, :mod:`~psp.train.log`, :mod:`~psp.train.selection` (best epoch),
:mod:`~psp.train.loop` (the :class:`Trainer`), :mod:`~psp.train.parallel` (several workers),
:mod:`~psp.train.distributed` (several ranks) and :mod:`~psp.train.run` (:func:`train`).
"""

from __future__ import annotations

from psp.train.bags import Bags, concat_bags
from psp.train.checkpoint import TrainState, has_checkpoint
from psp.train.config import TrainConfig, megabatch_size_at
from psp.train.data import EpochOrder, EpochStream, megabatch_windows
from psp.train.loop import Trainer
from psp.train.losses import MarginLoss, PairWeightingLoss, loss_for, pair_weighting_loss
from psp.train.negatives import MinedMegabatch, mine_negatives
from psp.train.ops import embed_bags, margin_loss, pool, row_gradients
from psp.train.parallel import ParallelTrainer
from psp.train.run import train
from psp.train.step import train_step, unique_rows

__all__ = [
    "Bags",
    "EpochOrder",
    "EpochStream",
    "MarginLoss",
    "MinedMegabatch",
    "PairWeightingLoss",
    "ParallelTrainer",
    "TrainConfig",
    "TrainState",
    "Trainer",
    "concat_bags",
    "embed_bags",
    "has_checkpoint",
    "loss_for",
    "margin_loss",
    "megabatch_size_at",
    "mine_negatives",
    "pair_weighting_loss",
    "megabatch_windows",
    "pool",
    "row_gradients",
    "train",
    "train_step",
    "unique_rows",
]
