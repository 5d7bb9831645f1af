"""Inference without torch: the model directory read into numpy, and mean pooling in scipy.

Embedding needs only the tokenizer, the embedding table and a mean of table rows per sentence.
Importing torch costs about 2 s of CPU, as long as embedding 100,000 news sentences takes, so
``psp embed`` and ``psp score`` run on this module alone (:class:`TableModel`), while
:class:`psp.model.PSPModel` (training, the library's ``psp.load``) wraps the same table in torch.

The directory format (``config.json``, ``sentencepiece.model``, ``embeddings.safetensors``) is
described in :mod:`psp.model`; it is defined here so that reading it needs no torch.

Pooling is a sparse matrix (one row per sentence, a 1 per piece) times the table, then a division
by the piece count: scipy adds each sentence's rows in order in float32 and divides, as
``F.embedding_bag(mode="mean")`` does on the CPU, so both give the same bits
(``tests/test_cli.py`` compares the command's output with the library's).
"""

from __future__ import annotations

import dataclasses
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from psp.config_keys import reject_unknown_keys
from psp.io import InputError
from psp.spm import PieceEncoder

__all__ = [
    "CONFIG_NAME",
    "SPM_NAME",
    "WEIGHTS_NAME",
    "WEIGHT_KEY",
    "ModelConfig",
    "TableModel",
    "load_table_model",
    "read_model_dir",
    "row_cosines",
]

FORMAT_VERSION = 1
CONFIG_NAME = "config.json"
SPM_NAME = "sentencepiece.model"
WEIGHTS_NAME = "embeddings.safetensors"
WEIGHT_KEY = "embedding.weight"

# The type and range of every ``config.json`` value (JSON Schema): a config edited by hand or
# written by another tool fails to load naming the key, instead of loading "false" as true or
# surfacing as a traceback deep inside torch or SentencePiece.
_COUNT = {"type": "integer", "minimum": 1}
CONFIG_SCHEMA = {
    "type": "object",
    "properties": {
        "dim": _COUNT,
        "vocab_size": _COUNT,
        "lowercase": {"type": "boolean"},
        "max_pieces": {"type": ["integer", "null"], "minimum": 1},
        "unk_id": {"type": "integer", "minimum": 0},
        "languages": {"type": "array", "items": {"type": "string"}},
        "provenance": {"type": "object"},
        "format_version": _COUNT,
    },
}


@dataclasses.dataclass
class ModelConfig:
    """Architecture and provenance of a model; ``config.json`` is this dataclass as JSON.

    Args:
        dim: embedding dimension.
        vocab_size: rows of the embedding table, equal to the SentencePiece vocabulary size.
        lowercase: lowercase text before SentencePiece (the P-SP models are trained lowercased).
        max_pieces: keep at most this many pieces per sentence (``None``: no limit).
        unk_id: SentencePiece id of ``<unk>``; in training its row stands for a sentence with no
            known piece, which :meth:`PSPModel.pool` maps to the zero vector instead.
        languages: language codes the model was trained on (informative).
        provenance: where the model came from: training data, ``spm_sha256``, ``created``,
            ``psp_version``, conversion source, ... Only ``spm_sha256`` is checked on load.
        format_version: layout version of the model directory.
    """

    dim: int
    vocab_size: int
    lowercase: bool = True
    max_pieces: int | None = None
    unk_id: int = 0
    languages: list[str] = dataclasses.field(default_factory=list)
    provenance: dict = dataclasses.field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = CONFIG_NAME) -> ModelConfig:
        """Parse ``config.json`` text; unknown or missing keys, and a value of the wrong type or
        out of range (:data:`CONFIG_SCHEMA`), are an error naming ``where`` and the key.

        Unknown keys are refused rather than ignored: they mean a newer format or a typo, and
        either way the model would not be the one its author saved.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(f"{where}: not valid JSON: {err}") from err
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected a JSON object")
        reject_unknown_keys(data, cls, where, InputError)
        missing = sorted(
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
            and f.name not in data
        )
        if missing:
            raise InputError(f"{where}: missing config keys {missing}")
        _check_types(data, where)
        config = cls(**data)
        if config.format_version > FORMAT_VERSION:
            raise InputError(
                f"{where}: format_version {config.format_version} is newer than this psp "
                f"({FORMAT_VERSION}); upgrade psp-mine"
            )
        return config


def _check_types(data: dict, where: str) -> None:
    """Raise :class:`InputError` naming the first key of ``data`` that breaks the schema."""
    from jsonschema import Draft202012Validator

    error = next(iter(Draft202012Validator(CONFIG_SCHEMA).iter_errors(data)), None)
    if error is not None:
        key = ".".join(map(str, error.absolute_path)) or "(top level)"
        raise InputError(f"{where}: key {key!r}: {error.message}")


# Pooling works in blocks of at most this much output, so each temporary stays below glibc's
# 32 MiB mmap ceiling and its memory is recycled from the heap instead of being mapped and
# page-faulted afresh every batch (see PSPModel.pool for the measurement).
POOL_BLOCK_BYTES = 16 << 20


def read_model_dir(path: str | os.PathLike) -> tuple[ModelConfig, PieceEncoder, np.ndarray]:
    """The config, tokenizer and float32 ``(vocab_size, dim)`` table of a model directory.

    Every problem (a missing file, a tokenizer that is not the one the config records, a weight
    table of the wrong shape) raises :class:`~psp.io.InputError` naming the file.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    directory = Path(path)
    if not directory.is_dir():
        raise InputError(f"{directory}: model directory not found")
    files = {name: directory / name for name in (CONFIG_NAME, SPM_NAME, WEIGHTS_NAME)}
    for file in files.values():
        if not file.is_file():
            raise InputError(f"{file}: missing from the model directory")
    config_file = files[CONFIG_NAME]
    config = ModelConfig.from_json(config_file.read_text(encoding="utf-8"), where=str(config_file))

    spm_file = files[SPM_NAME]
    try:
        encoder = PieceEncoder(spm_file, lowercase=config.lowercase, max_pieces=config.max_pieces)
    except (RuntimeError, OSError) as err:
        raise InputError(f"{spm_file}: not a SentencePiece model: {err}") from err
    expected = config.provenance.get("spm_sha256")
    if expected is not None and expected != encoder.sha256:
        raise InputError(
            f"{spm_file}: sha256 {encoder.sha256[:12]}… does not match the {expected[:12]}… "
            f"recorded in {config_file}; the tokenizer is not the one this model was trained with"
        )
    for what, got, want in [
        ("vocabulary size", encoder.vocab_size, config.vocab_size),
        ("unk id", encoder.unk_id, config.unk_id),
    ]:
        if got != want:
            raise InputError(
                f"{config_file}: SentencePiece {what} is {got} but the config says {want}"
            )

    weights_file = files[WEIGHTS_NAME]
    try:
        tensors = load_file(str(weights_file))
    except (SafetensorError, OSError, TypeError, ValueError) as err:
        raise InputError(f"{weights_file}: unreadable safetensors file: {err}") from err
    if set(tensors) != {WEIGHT_KEY}:
        raise InputError(
            f"{weights_file}: expected one tensor {WEIGHT_KEY!r}, found {sorted(tensors)}"
        )
    weight = tensors[WEIGHT_KEY]
    expected_shape = (config.vocab_size, config.dim)
    if weight.shape != expected_shape:
        raise InputError(
            f"{weights_file}: {WEIGHT_KEY} has shape {weight.shape} but {config_file} "
            f"says (vocab_size, dim) = {expected_shape}"
        )
    if weight.dtype.kind != "f":
        raise InputError(f"{weights_file}: {WEIGHT_KEY} has non-float dtype {weight.dtype}")
    return config, encoder, weight.astype(np.float32, copy=False)


def zero_textless(encoder: PieceEncoder, ids: np.ndarray, offsets: np.ndarray, out: np.ndarray):
    """Set to zero the row of every sentence with no known piece (empty, or nothing but
    characters the vocabulary lacks).

    It has no meaning to embed, and the shared ``<unk>`` (or bare word-boundary) row would make
    any two such sentences a perfect match (cosine 1). A zero row has cosine 0 with everything
    (:func:`row_cosines`, the miner's normalisation), so it never scores as a match.
    """
    n = len(offsets) - 1
    known = np.concatenate(([0], np.cumsum(~np.isin(ids, encoder.textless_ids))))
    out[:n][known[offsets[1:]] == known[offsets[:-1]]] = 0


class TableModel:
    """A model for inference only: tokenizer, float32 table and mean pooling, no torch.

    Its :meth:`pool` gives the bits :meth:`psp.model.PSPModel.pool` gives on the same table.
    """

    def __init__(self, config: ModelConfig, encoder: PieceEncoder, table: np.ndarray):
        self.config = config
        self.encoder = encoder
        self.table = table
        self._workers: tuple[int, ThreadPoolExecutor] | None = None

    @property
    def dim(self) -> int:
        return self.config.dim

    def pool(
        self, ids: np.ndarray, offsets: np.ndarray, out: np.ndarray, threads: int = 1
    ) -> np.ndarray:
        """Mean-pool encoded sentences (:meth:`PieceEncoder.encode`'s layout) into ``out``.

        In blocks of at most :data:`POOL_BLOCK_BYTES` of output, at least one per thread; the
        blocks run on ``threads`` threads (scipy's sparse product releases the GIL).
        """
        n = len(offsets) - 1
        rows = max(1, min(POOL_BLOCK_BYTES // (4 * self.dim), -(-n // threads)))
        starts = range(0, n, rows)

        def block(start: int) -> None:
            self._pool_block(ids, offsets, out, start, min(start + rows, n))

        if threads > 1 and len(starts) > 1:
            if self._workers is None or self._workers[0] != threads:
                self._workers = (threads, ThreadPoolExecutor(threads, thread_name_prefix="pool"))
            list(self._workers[1].map(block, starts))
        else:
            for start in starts:
                block(start)
        zero_textless(self.encoder, ids, offsets, out)
        return out

    def _pool_block(self, ids, offsets, out, start: int, stop: int) -> None:
        """Rows ``start:stop``: one sparse product (a 1 per piece) sums each sentence's rows
        into a fresh zeroed block (scipy cannot write into ``out``), copied over and divided by
        the piece counts."""
        from scipy.sparse import csr_matrix

        first, last = int(offsets[start]), int(offsets[stop])
        counts = csr_matrix(
            (
                np.ones(last - first, dtype=np.float32),
                ids[first:last],
                offsets[start : stop + 1] - first,
            ),
            shape=(stop - start, len(self.table)),
        )
        block = out[start:stop]
        block[:] = counts @ self.table
        lengths = np.diff(offsets[start : stop + 1]).astype(np.float32)
        np.divide(block, np.maximum(lengths, 1)[:, None], out=block)


def load_table_model(path: str | os.PathLike) -> TableModel:
    """:class:`TableModel` of a model directory (checked as :func:`read_model_dir` does)."""
    return TableModel(*read_model_dir(path))


def _normalize_rows(x: np.ndarray) -> None:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    x /= norms


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of ``a[i]`` and ``b[i]`` for every row (``a`` and ``b`` are normalised in place);
    a zero row scores 0."""
    _normalize_rows(a)
    _normalize_rows(b)
    return np.einsum("ij,ij->i", a, b)
