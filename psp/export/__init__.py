"""A psp model directory as a sentence-transformers or model2vec model directory.

A P-SP model is a table of piece embeddings averaged over a sentence's SentencePiece pieces: the
shape of sentence-transformers' ``StaticEmbedding`` and of model2vec's ``StaticModel``. Exporting
writes the table, a ``tokenizer.json`` rebuilt from the SentencePiece model
(:mod:`psp.export.tokenizer`) and the library's config files, so that
``SentenceTransformer(DIR)`` or ``StaticModel.from_pretrained(DIR)`` loads it offline, with no
code of ours, and embeds as ``psp embed`` does. Neither library is imported here.

Unknown pieces: psp leaves them out of the mean; ``StaticEmbedding`` averages every token id, so
the ``<unk>`` row is written as zeros: its vector keeps psp's direction (cosine 1) and its norm is
psp's times known / (known + unknown) pieces. model2vec drops ``<unk>`` itself, as psp does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from psp.export.tokenizer import build_tokenizer
from psp.io import atomic_path

__all__ = ["EXPORT_FILES", "LIBRARIES", "export_model"]

#: ``modules.json`` type of the static module: the name sentence-transformers 3.3 introduced it
#: under, which later versions still resolve, so one directory loads in every version since.
ST_STATIC_MODULE = "sentence_transformers.models.StaticEmbedding"
ST_FOLDER = "0_StaticEmbedding"


def _write_json(path: Path, content) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")


def _write_tensor(path: Path, key: str, table: np.ndarray) -> None:
    from safetensors.numpy import save_file

    with atomic_path(path) as tmp:
        save_file({key: np.ascontiguousarray(table)}, str(tmp))


def _write_tokenizer(path: Path, tokenizer) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(tokenizer.to_str(pretty=False), encoding="utf-8")


def _write_sentence_transformers(out: Path, table: np.ndarray, tokenizer, config) -> None:
    """``modules.json`` → ``0_StaticEmbedding/`` (``embedding.weight`` + ``tokenizer.json``), the
    layout ``SentenceTransformer.save`` writes for a ``StaticEmbedding`` model."""
    (out / ST_FOLDER).mkdir(parents=True, exist_ok=True)
    _write_tensor(out / ST_FOLDER / "model.safetensors", "embedding.weight", table)
    _write_tokenizer(out / ST_FOLDER / "tokenizer.json", tokenizer)
    _write_json(
        out / "config_sentence_transformers.json",
        {
            "model_type": "SentenceTransformer",
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    )
    _write_json(
        out / "modules.json",
        [{"idx": 0, "name": "0", "path": ST_FOLDER, "type": ST_STATIC_MODULE}],
    )


def _write_model2vec(out: Path, table: np.ndarray, tokenizer, config) -> None:
    """``config.json``, ``model.safetensors`` (``embeddings``) and ``tokenizer.json``, as
    ``StaticModel.save_pretrained`` writes them, with its ``modules.json`` beside (so that
    sentence-transformers loads the folder too). No normalisation, as ``psp embed``; truncation
    at the model's ``max_pieces`` (model2vec counts ``<unk>`` there, psp does not)."""
    out.mkdir(parents=True, exist_ok=True)
    _write_tensor(out / "model.safetensors", "embeddings", table)
    _write_tokenizer(out / "tokenizer.json", tokenizer)
    _write_json(
        out / "modules.json", [{"idx": 0, "name": "0", "path": ".", "type": ST_STATIC_MODULE}]
    )
    _write_json(
        out / "config.json",
        {
            "model_type": "model2vec",
            "architectures": ["StaticModel"],
            "tokenizer_name": None,
            "apply_pca": None,
            "apply_zipf": None,
            "hidden_dim": config.dim,
            "seq_length": 1000000,
            "normalize": False,
            "max_length": config.max_pieces,
            "embedding_dtype": "float32",
        },
    )


LIBRARIES = {
    "sentence-transformers": _write_sentence_transformers,
    "model2vec": _write_model2vec,
}
#: The files each library's directory holds (a workflow lists them as outputs).
EXPORT_FILES = {
    "sentence-transformers": (
        "modules.json",
        "config_sentence_transformers.json",
        f"{ST_FOLDER}/model.safetensors",
        f"{ST_FOLDER}/tokenizer.json",
        "README.md",
    ),
    "model2vec": (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "modules.json",
        "README.md",
    ),
}


def export_model(model_dir: str | os.PathLike, out_dir: str | os.PathLike, *, library: str) -> Path:
    """Write ``model_dir`` (a psp model directory) to ``out_dir`` in ``library``'s layout, with a
    model card (``README.md``: the source's card when it has one); returns ``out_dir``.

    Every file is written atomically; the card comes last, so a directory with a card is whole.
    """
    from psp.export.model_card import export_card
    from psp.model.directory import read_model_dir

    if library not in LIBRARIES:
        raise ValueError(f"unknown library {library!r}; expected one of {', '.join(LIBRARIES)}")
    config, encoder, table = read_model_dir(model_dir)
    table = table.copy()
    table[encoder.unk_id] = 0.0
    tokenizer = build_tokenizer(encoder.model_bytes, lowercase=config.lowercase)
    out = Path(out_dir)
    LIBRARIES[library](out, table, tokenizer, config)
    with atomic_path(out / "README.md") as tmp:
        tmp.write_text(export_card(model_dir, config, library=library), encoding="utf-8")
    return out
