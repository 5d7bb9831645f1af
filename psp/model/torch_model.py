"""The P-SP model: a sentence is the mean of its SentencePiece piece embeddings.

:class:`PSPModel` is the trainable, torch form: the tokenizer and an ``nn.Embedding`` whose weight
the trainer updates in place. Its directory on disk (``config.json``, ``sentencepiece.model``,
``embeddings.safetensors``) is defined in :mod:`psp.model.directory`; its pooling at inference is
:func:`psp.model.pooling.mean_pool`, the one ``psp embed`` and ``psp score`` use, so the library
and the command line give the same bits. Training pools through :func:`psp.train.ops.pool`
instead (an autograd function; see :mod:`psp.model.pooling` for how the two are held equal).

Inference speed is the point of the method (it has no encoder network), so :meth:`PSPModel.embed`
keeps per-sentence Python to the lowercasing inside
:class:`psp.model.piece_encoder.PieceEncoder`: one batched SentencePiece call, vectorised
unknown-dropping, then one sparse product per block over flat ids and offsets. Unlike a padded
encoder it never pads, so it does not sort by length.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from psp.model.directory import ModelConfig, read_model_dir, write_model_dir
from psp.model.piece_encoder import PieceEncoder
from psp.model.pooling import SentenceEmbedder, mean_pool, row_cosines

__all__ = ["PSPModel", "load"]

log = logging.getLogger(__name__)


class PSPModel(nn.Module):
    """Mean of SentencePiece piece embeddings, with the tokenizer built in.

    Args:
        config: the architecture.
        encoder: the :class:`~psp.model.piece_encoder.PieceEncoder` whose ids index
            ``embedding``; its vocabulary size must equal ``config.vocab_size``.
        weight: initial ``(vocab_size, dim)`` table, taken as is (no copy); ``None`` draws
            N(0, 1) rows from torch's global generator (see :meth:`from_spm` for a seeded one).

    Example:
        >>> model = psp.load("results/models/es-en")  # doctest: +SKIP
        >>> model.embed(["A man plays the guitar.", "Un hombre toca la guitarra."]).shape
        (2, 1024)
    """

    def __init__(
        self,
        config: ModelConfig,
        encoder: PieceEncoder,
        weight: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        if encoder.vocab_size != config.vocab_size:
            raise ValueError(
                f"SentencePiece vocabulary has {encoder.vocab_size} pieces but the config says "
                f"vocab_size={config.vocab_size}"
            )
        if encoder.unk_id != config.unk_id:
            raise ValueError(
                f"SentencePiece unk id is {encoder.unk_id} but the config says {config.unk_id}"
            )
        self.config = config
        self.encoder = encoder
        self.embedding = nn.Embedding(config.vocab_size, config.dim, _weight=weight)

    @property
    def dim(self) -> int:
        return self.config.dim

    @property
    def device(self) -> torch.device:
        return self.embedding.weight.device

    @classmethod
    def from_spm(
        cls,
        spm_path: str | os.PathLike,
        dim: int,
        *,
        seed: int = 0,
        languages: Sequence[str] = (),
        lowercase: bool = True,
        max_pieces: int | None = None,
        provenance: dict | None = None,
    ) -> PSPModel:
        """A fresh, untrained model over a SentencePiece vocabulary.

        Rows are drawn from N(0, 1), ``nn.Embedding``'s default and what the original P-SP code
        trains from: Adam's steps do not scale with the weights, so the initial scale sets the
        effective learning rate and the paper's ``lr=1e-3`` assumes this one. Untrained, the model
        is the "random piece embeddings" baseline: independent random vectors, so the cosine of
        two sentences grows with the pieces they share (a bag-of-pieces overlap score).
        """
        encoder = PieceEncoder(spm_path, lowercase=lowercase, max_pieces=max_pieces)
        config = ModelConfig.for_encoder(
            encoder,
            dim=dim,
            languages=list(languages),
            provenance={"init": f"normal(0, 1), seed {seed}", **(provenance or {})},
        )
        generator = torch.Generator().manual_seed(seed)
        weight = torch.randn(config.vocab_size, dim, generator=generator)
        return cls(config, encoder, weight=weight)

    embed = SentenceEmbedder.embed

    def default_threads(self) -> int:
        """Threads of an ``embed`` call without ``num_threads``: torch's current setting."""
        return torch.get_num_threads()

    @contextlib.contextmanager
    def embed_context(self, threads: int) -> Iterator[None]:
        """torch at ``threads`` threads and in inference mode for an ``embed`` call."""
        previous = torch.get_num_threads()
        try:
            torch.set_num_threads(threads)
            with torch.inference_mode():
                yield
        finally:
            torch.set_num_threads(previous)

    def pool(
        self, ids: np.ndarray, offsets: np.ndarray, out: np.ndarray, threads: int = 1
    ) -> np.ndarray:
        """Mean-pool encoded sentences (:meth:`PieceEncoder.encode`'s layout) into ``out``.

        The second half of :meth:`embed`, public so a caller can tokenise the next batch in
        another thread while this one pools (the word cache and the pooling both release the GIL). It
        is :func:`psp.model.pooling.mean_pool` on the CPU copy of the table (the weight itself on
        the CPU): a sentence with no known piece pools to the zero vector.
        """
        table = self.embedding.weight.detach().to("cpu", torch.float32).numpy()
        textless = self.encoder.textless_ids
        return mean_pool(table, ids, offsets, out=out, textless_ids=textless, threads=threads)

    def score(
        self,
        a: Sequence[str] | str,
        b: Sequence[str] | str,
        batch_size: int = 8192,
        num_threads: int | None = None,
    ) -> np.ndarray:
        """Cosine similarity of ``a[i]`` and ``b[i]`` for every ``i`` (float32 ``(n,)``).

        Two lone strings give a single float. A sentence whose embedding is zero scores 0.
        """
        single = isinstance(a, str) and isinstance(b, str)
        a_list = [a] if isinstance(a, str) else a
        b_list = [b] if isinstance(b, str) else b
        if len(a_list) != len(b_list):
            raise ValueError(
                f"score() needs as many a as b sentences, got {len(a_list)} and {len(b_list)}"
            )
        kwargs = {"batch_size": batch_size, "num_threads": num_threads}
        cosine = row_cosines(self.embed(a_list, **kwargs), self.embed(b_list, **kwargs))
        return cosine[0] if single else cosine

    def save(self, directory: str | os.PathLike, float16: bool = False) -> Path:
        """Write the model directory (:func:`psp.model.directory.write_model_dir`).

        ``float16`` halves the weight file; :func:`load` upcasts to float32, so embeddings change
        by float16 rounding only (relative error ~5e-4 per component).
        """
        weight = self.embedding.weight.detach().to(
            "cpu", torch.float16 if float16 else torch.float32
        )
        config = dataclasses.replace(
            self.config, provenance={**self.config.provenance, "spm_sha256": self.encoder.sha256}
        )
        return write_model_dir(directory, config, self.encoder.model_bytes, weight.numpy())


def load(path: str | os.PathLike, device: str | torch.device = "cpu") -> PSPModel:
    """Load a model directory written by :meth:`PSPModel.save` (JSON + safetensors, no code run).

    Every problem (a missing file, a tokenizer that is not the one the config records, a weight
    table of the wrong shape) raises :class:`~psp.io.InputError` naming the file (see
    :func:`psp.model.directory.read_model_dir`, which ``psp embed`` uses without torch).
    """
    config, encoder, table = read_model_dir(path)
    model = PSPModel(config, encoder, weight=torch.from_numpy(table))
    return model.to(device).eval()
