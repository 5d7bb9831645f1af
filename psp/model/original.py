"""Import the original released P-SP checkpoints into a :mod:`psp.model.torch_model` directory.

An original checkpoint is a pickled ``torch.save`` dict: ``state_dict`` (with
``embedding.weight``), ``vocab`` (piece string → row, in first-seen order over the training
corpus, unknown piece ``UUUNKKK``), ``args`` (an ``argparse.Namespace`` with ``dim``,
``lower_case``, ...) and optimizer state. Our format indexes rows by SentencePiece id, so rows are
remapped through ``sp.piece_to_id``:

- the SentencePiece ``<unk>`` row gets the ``UUUNKKK`` row (it embeds sentences with no known
  piece, as in the original);
- vocab pieces the SentencePiece model does not have are dropped (counted and logged with
  examples). Most are characters outside SentencePiece's vocabulary: ``EncodeAsPieces`` returns
  their surface form, so the original gave each its own trained row, whereas our id-based encoder
  sees ``<unk>`` and drops it. Sentences containing such characters therefore embed without them;
- SentencePiece pieces missing from the vocab (never seen in training) get a copy of the
  ``UUUNKKK`` row, which is what the original encoder maps them to when ``zero_unk`` is off. With
  ``zero_unk`` on, the original *drops* them from the mean instead; our encoder drops only
  SentencePiece's own ``<unk>`` id, so for sentences containing such a piece the two encoders
  differ (they agree exactly on every sentence whose pieces are all in the vocab). The count of
  such pieces is logged and recorded in the model's provenance.

This is the only place in the package that unpickles, and only because the original format
requires it: unpickling executes code from the file, so convert only checkpoints you trust.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import sentencepiece as spm
import torch

from psp.io import InputError, sha256_file
from psp.model.directory import ModelConfig
from psp.model.piece_encoder import PieceEncoder
from psp.model.torch_model import PSPModel

__all__ = ["ORIGINAL_UNK", "convert_original"]

log = logging.getLogger(__name__)

ORIGINAL_UNK = "UUUNKKK"


def _json_args(args) -> dict:
    """The checkpoint's training arguments that JSON can hold, for provenance."""
    items = vars(args).items() if hasattr(args, "__dict__") else dict(args).items()
    return {k: v for k, v in items if isinstance(v, str | int | float | bool) or v is None}


def _read_checkpoint(path: Path) -> tuple[torch.Tensor, dict[str, int], object]:
    log.warning(
        "%s: loading an original P-SP checkpoint with pickle, which executes code from the file; "
        "convert only checkpoints from a source you trust",
        path,
    )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # any unpickling failure means "not a checkpoint"
        raise InputError(f"{path}: not a readable torch checkpoint: {err}") from err
    if not isinstance(checkpoint, dict) or not {"state_dict", "vocab", "args"} <= set(checkpoint):
        found = sorted(checkpoint) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise InputError(f"{path}: expected a dict with state_dict, vocab and args; found {found}")
    weight = checkpoint["state_dict"].get("embedding.weight")
    if weight is None or weight.dim() != 2:
        raise InputError(f"{path}: state_dict has no 2-D 'embedding.weight'")
    vocab = checkpoint["vocab"]
    if ORIGINAL_UNK not in vocab:
        raise InputError(f"{path}: vocab has no unknown piece {ORIGINAL_UNK!r}")
    rows = np.fromiter(vocab.values(), dtype=np.int64, count=len(vocab))
    if rows.min() < 0 or rows.max() >= weight.shape[0]:
        raise InputError(
            f"{path}: vocab rows span [{rows.min()}, {rows.max()}] but embedding.weight has "
            f"{weight.shape[0]} rows"
        )
    args = checkpoint["args"]
    if checkpoint.get("vocab_fr") is not None and not getattr(args, "share_vocab", True):
        raise InputError(f"{path}: separate per-language vocabularies are not supported")
    return weight.detach().to(torch.float32), vocab, args


def _checkpoint_rows(
    encoder: PieceEncoder, vocab: dict[str, int], spm_model: str | os.PathLike
) -> tuple[np.ndarray, list[str], list[str]]:
    """The checkpoint row of each SentencePiece piece, the ``ORIGINAL_UNK`` row where the
    checkpoint lacks the piece; with the pieces so mapped (``absent``) and the checkpoint pieces
    no SentencePiece piece uses (``dropped``), both logged."""
    pieces = encoder.pieces()
    unk_row = vocab[ORIGINAL_UNK]
    rows = np.array([vocab.get(piece, unk_row) for piece in pieces], dtype=np.int64)
    rows[encoder.unk_id] = unk_row
    sp = spm.SentencePieceProcessor(model_proto=encoder.model_bytes)
    absent = [  # control pieces (<s>, </s>) never come out of encode(), so they do not count
        p
        for i, p in enumerate(pieces)
        if not (sp.is_unknown(i) or sp.is_control(i)) and p not in vocab
    ]
    spm_pieces = set(pieces)
    dropped = [p for p in vocab if p != ORIGINAL_UNK and p not in spm_pieces]
    if dropped:
        log.warning(
            "%d checkpoint vocab pieces are not in %s and are dropped (characters it treats as "
            "unknown are dropped when embedding), e.g. %s",
            len(dropped),
            spm_model,
            dropped[:10],
        )
    if absent:
        log.info(
            "%d SentencePiece pieces are not in the checkpoint vocab and get the %s row, e.g. %s",
            len(absent),
            ORIGINAL_UNK,
            absent[:10],
        )
    return rows, absent, dropped


def convert_original(
    ckpt: str | os.PathLike,
    spm_model: str | os.PathLike,
    out_dir: str | os.PathLike,
    float16: bool = False,
) -> PSPModel:
    """Convert an original checkpoint plus its SentencePiece model into a model directory.

    Returns the converted model (already saved to ``out_dir``).

    Example:
        >>> convert_original("model.para.lc.100.pt", "paranmt.model", "models/paranmt")  # doctest: +SKIP
    """
    ckpt = Path(ckpt)
    weight, vocab, args = _read_checkpoint(ckpt)
    dim = int(weight.shape[1])
    if getattr(args, "dim", dim) != dim:
        raise InputError(f"{ckpt}: args.dim={args.dim} but embedding.weight has {dim} columns")
    if getattr(args, "tokenize", False):
        log.warning(
            "%s was trained on Moses-tokenized text; psp embeds raw text, so scores can differ",
            ckpt,
        )
    lowercase = bool(getattr(args, "lower_case", True))
    encoder = PieceEncoder(spm_model, lowercase=lowercase)
    rows, absent, dropped = _checkpoint_rows(encoder, vocab, spm_model)
    config = ModelConfig.for_encoder(
        encoder,
        dim=dim,
        languages=[],
        provenance={
            "converted_from": ckpt.name,
            "checkpoint_sha256": sha256_file(ckpt),
            "original_args": _json_args(args),
            "pieces_missing_from_checkpoint": len(absent),
            "checkpoint_pieces_dropped": len(dropped),
        },
    )
    model = PSPModel(config, encoder, weight=weight[torch.from_numpy(rows)])
    model.save(out_dir, float16=float16)
    log.info("wrote %s: %d pieces x %d dims", out_dir, encoder.vocab_size, dim)
    return model.eval()
