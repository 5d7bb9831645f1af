"""Converting original P-SP checkpoints: our encoder must agree with the original one."""

from __future__ import annotations

import argparse
import random

import numpy as np
import pytest
import sentencepiece as spm
import torch

import psp
from psp.cli import main
from psp.io import InputError
from psp.model.original import ORIGINAL_UNK, convert_original

DIM = 16


@pytest.fixture(scope="module")
def checkpoint(news, spm_path, tmp_path_factory):
    """A checkpoint laid out exactly like the original ``save_params``.

    The vocab is built the original way, first-seen over a "training corpus" (the first 300
    news lines), so pieces absent from that corpus are missing; rows are then shuffled, and extra
    rows whose pieces the SentencePiece model lacks are mixed in.
    """
    sp = spm.SentencePieceProcessor(model_file=str(spm_path))
    vocab: dict[str, int] = {ORIGINAL_UNK: 0}
    for line in news[:300]:
        for piece in sp.EncodeAsPieces(line.lower()):
            vocab.setdefault(piece, len(vocab))
    for extra in ["▁qqxyzzy", "zzq", "▁🙂🙂"]:
        vocab[extra] = len(vocab)
    pieces = list(vocab)
    rows = list(range(len(pieces) + 4))  # 4 rows no piece points to
    random.Random(0).shuffle(rows)
    vocab = {piece: rows[i] for i, piece in enumerate(pieces)}
    weight = torch.randn(len(rows), DIM, generator=torch.Generator().manual_seed(0))
    args = argparse.Namespace(
        dim=DIM, lower_case=True, tokenize=False, share_vocab=True, zero_unk=1, model="avg"
    )
    path = tmp_path_factory.mktemp("ckpt") / "model.pt"
    torch.save(
        {
            "state_dict": {"embedding.weight": weight},
            "vocab": vocab,
            "vocab_fr": None,
            "args": args,
            "optimizer": {"state": {0: {"step": 10}}, "param_groups": [{"lr": 0.001}]},
            "epoch": 3,
        },
        path,
    )
    return path, vocab, weight


def original_embed(sentence: str, sp, vocab, weight, zero_unk: bool) -> np.ndarray:
    """The original encoder, re-implemented: lowercase, EncodeAsPieces, vocab lookup, mean."""
    rows = []
    for piece in sp.EncodeAsPieces(sentence.lower()):
        if piece in vocab:
            rows.append(vocab[piece])
        elif not zero_unk:
            rows.append(vocab[ORIGINAL_UNK])
    rows = rows or [vocab[ORIGINAL_UNK]]
    return weight.numpy()[rows].mean(axis=0)


@pytest.fixture(scope="module")
def converted(checkpoint, spm_path, tmp_path_factory):
    return convert_original(checkpoint[0], spm_path, tmp_path_factory.mktemp("out") / "m")


def test_matches_original_encoder_on_known_pieces(converted, checkpoint, spm_path, news):
    _, vocab, weight = checkpoint
    sp = spm.SentencePieceProcessor(model_file=str(spm_path))
    known = [
        s
        for s in news[:300]
        if all(
            p in vocab and sp.piece_to_id(p) != sp.unk_id() for p in sp.EncodeAsPieces(s.lower())
        )
    ]
    assert len(known) > 100
    expected = np.stack([original_embed(s, sp, vocab, weight, zero_unk=True) for s in known])
    np.testing.assert_allclose(converted.embed(known), expected, rtol=0, atol=1e-6)


def test_pieces_missing_from_checkpoint_get_unk_row(converted, checkpoint, spm_path, news):
    """Outside the checkpoint's vocab, ours equals the original with ``zero_unk`` off."""
    _, vocab, weight = checkpoint
    sp = spm.SentencePieceProcessor(model_file=str(spm_path))
    unseen = [
        s
        for s in news[300:]
        if any(p not in vocab for p in sp.EncodeAsPieces(s.lower()))
        and sp.unk_id() not in sp.encode(s.lower())
    ][:50]
    assert unseen
    expected = np.stack([original_embed(s, sp, vocab, weight, zero_unk=False) for s in unseen])
    np.testing.assert_allclose(converted.embed(unseen), expected, rtol=0, atol=1e-6)
    assert converted.config.provenance["pieces_missing_from_checkpoint"] > 0


def test_empty_sentence_embeds_as_zero_not_the_original_unk_row(converted, checkpoint):
    """A deliberate difference from the original, which embedded "" as its unknown row: two
    empty sentences would then score 1.0, a perfect match (see the README's scoring note)."""
    _, vocab, weight = checkpoint
    assert not np.any(converted.embed(""))
    assert np.any(weight[vocab[ORIGINAL_UNK]].numpy())


def test_dropped_pieces_recorded_and_warned(converted, checkpoint, spm_path, tmp_path, caplog):
    """Dropped: the extra pieces, and characters SentencePiece leaves unknown (kept as surfaces)."""
    _, vocab, _ = checkpoint
    sp = spm.SentencePieceProcessor(model_file=str(spm_path))
    outside = [p for p in vocab if p != ORIGINAL_UNK and sp.piece_to_id(p) == sp.unk_id()]
    assert {"zzq", "▁qqxyzzy"} <= set(outside)
    assert converted.config.provenance["checkpoint_pieces_dropped"] == len(outside)
    with caplog.at_level("WARNING"):
        convert_original(checkpoint[0], spm_path, tmp_path / "again")
    assert "executes code" in caplog.text
    assert f"{len(outside)} checkpoint vocab pieces" in caplog.text


def test_saved_dir_loads_identically(converted, news, tmp_path, checkpoint, spm_path):
    out = tmp_path / "cli"
    assert main(["convert-original", str(checkpoint[0]), str(spm_path), str(out)]) == 0
    loaded = psp.load(out)
    assert loaded.config.provenance["original_args"]["zero_unk"] == 1
    np.testing.assert_array_equal(loaded.embed(news[:20]), converted.embed(news[:20]))


def test_not_a_checkpoint(tmp_path, spm_path):
    path = tmp_path / "bad.pt"
    torch.save({"state_dict": {}}, path)
    with pytest.raises(InputError, match="bad.pt.*vocab"):
        convert_original(path, spm_path, tmp_path / "out")
    path.write_bytes(b"not a pickle")
    with pytest.raises(InputError, match="bad.pt"):
        convert_original(path, spm_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
