"""psp-mine: paraphrastic sentence embeddings (P-SP) and Faiss bitext mining.

The public entry point is :func:`psp.load`, which returns a model with
``embed(sentences) -> np.ndarray`` and ``score(a, b) -> np.ndarray``.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "load"]


def load(path, device: str = "cpu"):
    """Load a model directory (``config.json`` + ``sentencepiece.model`` + ``embeddings.safetensors``).

    Imported lazily so that ``import psp`` stays cheap for the data stage.
    """
    from psp.model.torch_model import load as _load

    return _load(path, device=device)
