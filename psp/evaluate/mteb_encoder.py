"""A psp model as an MTEB encoder, so that MTEB runs on it in one line (with the hub reachable):

    import mteb
    from psp.evaluate.mteb_encoder import MTEBEncoder

    mteb.evaluate(MTEBEncoder("results/models/en"), mteb.get_tasks(tasks=["STSBenchmark"]))

MTEB 2 calls ``encode`` with a DataLoader of batches (``{"text": [...]}``) and keyword arguments
(task metadata, split, prompt type); MTEB 1 and sentence-transformers-style callers pass a list
of sentences. Both give one float32 row per sentence, as ``psp.load(dir).embed``: prompts and
task names do not change a P-SP embedding. Similarity is cosine, the measure the model was trained
for. ``mteb`` is imported only for :attr:`mteb_model_meta`, when MTEB asks for it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = ["MTEBEncoder"]


def _sentences(inputs) -> list[str]:
    """The sentences of a list of strings or of an iterable of MTEB batches (dicts with a
    ``text`` list), in order."""
    if isinstance(inputs, str):
        raise TypeError("encode() takes a list of sentences or MTEB batches, not a single string")
    sentences: list[str] = []
    for item in inputs:
        if isinstance(item, str):
            sentences.append(item)
        elif isinstance(item, dict) and "text" in item:
            sentences.extend(item["text"])
        else:
            raise TypeError(f"encode(): expected sentences or batches with 'text', got {item!r}")
    return sentences


def _unit_rows(x) -> np.ndarray:
    x = np.atleast_2d(np.asarray(x, dtype=np.float32))
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


class MTEBEncoder:
    """MTEB's encoder protocol over a psp model directory (``encode``, ``similarity``,
    ``similarity_pairwise``, ``mteb_model_meta``).

    Args:
        model_dir: a psp model directory.
        revision: recorded in MTEB's results (default: the SentencePiece model's sha256 prefix).
        device: torch device for :func:`psp.load`.
    """

    def __init__(
        self, model_dir: str | os.PathLike, revision: str | None = None, *, device: str = "cpu"
    ):
        from psp.model.torch_model import load

        self.model_dir = Path(model_dir)
        self.model = load(model_dir, device=device)
        self.revision = revision or self.model.encoder.sha256[:12]

    def encode(self, inputs: Iterable, **kwargs) -> np.ndarray:
        """One float32 row per sentence; MTEB's keyword arguments (task metadata, split,
        prompt type, batch size) do not change a P-SP embedding and are ignored."""
        sentences = _sentences(inputs)
        if not sentences:
            return np.zeros((0, self.model.config.dim), dtype=np.float32)
        return np.asarray(self.model.embed(sentences), dtype=np.float32)

    def similarity(self, embeddings1, embeddings2) -> np.ndarray:
        """Cosine of every row of ``embeddings1`` with every row of ``embeddings2``."""
        return _unit_rows(embeddings1) @ _unit_rows(embeddings2).T

    def similarity_pairwise(self, embeddings1, embeddings2) -> np.ndarray:
        """Cosine of row ``i`` of ``embeddings1`` with row ``i`` of ``embeddings2``."""
        return np.einsum("ij,ij->i", _unit_rows(embeddings1), _unit_rows(embeddings2))

    @property
    def mteb_model_meta(self):
        """MTEB's ``ModelMeta`` for the results' name (``psp-mine/{directory}``), revision,
        size and similarity; ``None`` when ``mteb`` is not installed."""
        try:
            from mteb.models import ModelMeta
        except ImportError:
            return None
        config = self.model.config
        return ModelMeta.create_empty(
            overwrites={
                "name": f"psp-mine/{self.model_dir.name}",
                "revision": self.revision,
                "embed_dim": config.dim,
                "n_parameters": config.vocab_size * config.dim,
                "similarity_fn_name": "cosine",
                "open_weights": True,
                "framework": ["PyTorch"],
                "use_instructions": False,
            }
        )
