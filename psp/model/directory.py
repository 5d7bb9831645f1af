"""The model directory format: what a saved model is on disk, read and written without torch.

Everything a model needs lives in one directory, with no pickle anywhere:

- ``config.json``: :class:`ModelConfig` (dimension, vocabulary size, lowercasing, truncation,
  languages, provenance), enough to rebuild the architecture before reading any weight;
- ``sentencepiece.model``: the tokenizer; its sha256 is recorded in the config, so a model dir whose
  tokenizer was swapped for another one fails to load instead of silently embedding garbage;
- ``embeddings.safetensors``: one tensor ``embedding.weight`` of shape ``(vocab_size, dim)`` where
  row ``i`` is SentencePiece id ``i`` (float32, or float16 to halve the file; loading upcasts).

:func:`read_model_dir` and :func:`write_model_dir` are the only code that reads or writes these
files; :class:`psp.model.torch_model.PSPModel` (torch) and :class:`psp.model.pooling.TableModel`
(numpy) both go through them. No torch here: importing it costs about 2 s of CPU, as long as
``psp embed`` takes for 100,000 sentences.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from pathlib import Path

import numpy as np

from psp import __version__
from psp.config_schema import reject_unknown_keys
from psp.io import InputError, atomic_path
from psp.model.piece_encoder import PieceEncoder

__all__ = [
    "CONFIG_NAME",
    "FORMAT_VERSION",
    "SPM_NAME",
    "WEIGHTS_NAME",
    "WEIGHT_KEY",
    "ModelConfig",
    "read_model_dir",
    "write_model_dir",
]

FORMAT_VERSION = 1
CONFIG_NAME = "config.json"
SPM_NAME = "sentencepiece.model"
WEIGHTS_NAME = "embeddings.safetensors"
#: Every file a model directory is loaded from (its model card, README.md, is not read).
MODEL_FILES = (CONFIG_NAME, SPM_NAME, WEIGHTS_NAME)
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
            known piece, which :func:`psp.model.pooling.mean_pool` maps to the zero vector instead.
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

    @classmethod
    def for_encoder(
        cls,
        encoder: PieceEncoder,
        *,
        dim: int,
        languages: list[str],
        provenance: dict,
    ) -> ModelConfig:
        """The config of a new model over ``encoder`` (a fresh one, or one converted from an
        original checkpoint): the tokenizer's settings and checksum, when and by which version
        it was made, then ``provenance``."""
        return cls(
            dim=dim,
            vocab_size=encoder.vocab_size,
            lowercase=encoder.lowercase,
            max_pieces=encoder.max_pieces,
            unk_id=encoder.unk_id,
            languages=languages,
            provenance={
                "spm_sha256": encoder.sha256,
                "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "psp_version": __version__,
                **provenance,
            },
        )

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


# The Python type of each JSON type, for :func:`_plainly_fits` (bool is not an integer in JSON).
_JSON_TYPES = {
    "integer": int,
    "boolean": bool,
    "string": str,
    "array": list,
    "object": dict,
    "null": type(None),
}
_PLAIN_KEYWORDS = frozenset({"type", "minimum", "items", "properties"})


def _plainly_fits(schema: dict, value) -> bool:
    """Whether ``value`` plainly satisfies ``schema``, read for the keywords of
    :data:`CONFIG_SCHEMA` only (``type``, ``minimum``, ``items``, ``properties``).

    True is final; False means "ask jsonschema", which may still accept the value (``2.0`` is
    an integer in JSON Schema) and otherwise words the error. Importing jsonschema costs
    80-160 ms, a sizeable share of a ``psp embed`` of 100,000 lines, to check eight keys that
    are almost always right.
    """
    if not schema.keys() <= _PLAIN_KEYWORDS:
        return False
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not any(type(value) is _JSON_TYPES.get(name) for name in names):
            return False
    if "minimum" in schema and type(value) is int and value < schema["minimum"]:
        return False
    if "items" in schema and isinstance(value, list):
        if not all(_plainly_fits(schema["items"], item) for item in value):
            return False
    if "properties" in schema and isinstance(value, dict):
        properties = schema["properties"]
        if not all(_plainly_fits(properties[k], v) for k, v in value.items() if k in properties):
            return False
    return True


def _check_types(data: dict, where: str) -> None:
    """Raise :class:`InputError` naming the first key of ``data`` that breaks the schema."""
    if _plainly_fits(CONFIG_SCHEMA, data):
        return
    from jsonschema import Draft202012Validator

    error = next(iter(Draft202012Validator(CONFIG_SCHEMA).iter_errors(data)), None)
    if error is not None:
        key = ".".join(map(str, error.absolute_path)) or "(top level)"
        raise InputError(f"{where}: key {key!r}: {error.message}")


def read_model_dir(
    path: str | os.PathLike, *, map_table: bool = False
) -> tuple[ModelConfig, PieceEncoder, np.ndarray]:
    """The config, tokenizer and float32 ``(vocab_size, dim)`` table of a model directory.

    Every problem (a missing file, a tokenizer that is not the one the config records, a weight
    table of the wrong shape) raises :class:`~psp.io.InputError` naming the file.

    Args:
        map_table: give a float32 table as a read-only map of the file rather than a copy read
            into memory: nothing is read at load (reading 32 MiB into fresh memory was a third of
            ``psp embed``'s model load), pages come from the page cache as pooling first reads
            them, and every process that maps the same model on a host shares one copy. For
            inference: a table to train must be its own (a float16 table is always a copy).
    """
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
    weight = _read_weight(weights_file, map_table)
    expected_shape = (config.vocab_size, config.dim)
    if weight.shape != expected_shape:
        raise InputError(
            f"{weights_file}: {WEIGHT_KEY} has shape {weight.shape} but {config_file} "
            f"says (vocab_size, dim) = {expected_shape}"
        )
    if weight.dtype.kind != "f":
        raise InputError(f"{weights_file}: {WEIGHT_KEY} has non-float dtype {weight.dtype}")
    return config, encoder, weight.astype(np.float32, copy=False)


#: safetensors dtype names as numpy dtypes (the format is little-endian).
_SAFETENSORS_DTYPES = {"F16": "<f2", "F32": "<f4", "F64": "<f8"}


def _read_weight(weights_file: Path, map_table: bool = False) -> np.ndarray:
    """The one tensor :data:`WEIGHT_KEY` of a safetensors file, read from disk into its array,
    or (``map_table``, a float32 tensor) mapped read-only from the file.

    safetensors checks the file (``safe_open`` validates the header and the data offsets against
    the file's size without reading the data); numpy then reads the tensor's bytes straight into
    the array. ``load_file`` reads the whole file into a bytes object and copies the tensor out
    of it: a transient as large as the table at every load (32 MiB for an 8,000 x 1,024 model),
    the peak of a short ``psp embed`` or ``psp score``. Model files are replaced by renaming
    (:func:`write_model_dir`), so a mapped table keeps the file it was mapped from.
    """
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(weights_file), framework="np") as handle:
            keys = sorted(handle.keys())
            dtype = handle.get_slice(WEIGHT_KEY).get_dtype() if keys == [WEIGHT_KEY] else None
    except (SafetensorError, OSError) as err:
        raise InputError(f"{weights_file}: unreadable safetensors file: {err}") from err
    if keys != [WEIGHT_KEY]:
        raise InputError(f"{weights_file}: expected one tensor {WEIGHT_KEY!r}, found {keys}")
    if dtype not in _SAFETENSORS_DTYPES:
        raise InputError(f"{weights_file}: {WEIGHT_KEY} has non-float dtype {dtype}")
    with weights_file.open("rb") as file:
        header_size = int.from_bytes(file.read(8), "little")
        entry = json.loads(file.read(header_size))[WEIGHT_KEY]
        begin, end = entry["data_offsets"]
        element = np.dtype(_SAFETENSORS_DTYPES[dtype])
        count = (end - begin) // element.itemsize
        offset = 8 + header_size + begin
        if map_table and element == np.float32 and count:
            mapped = np.memmap(file, dtype=element, mode="r", offset=offset, shape=(count,))
            return mapped.view(np.ndarray).reshape(entry["shape"])
        file.seek(offset)
        weight = np.fromfile(file, dtype=element, count=count)
    return weight.reshape(entry["shape"])


def write_model_dir(
    directory: str | os.PathLike, config: ModelConfig, spm_bytes: bytes, weight: np.ndarray
) -> Path:
    """Write a model directory; each file is written atomically, ``config.json`` last.

    ``weight`` is the ``(vocab_size, dim)`` table as written (float32, or float16 to halve the
    file). Returns the directory.
    """
    from safetensors.numpy import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with atomic_path(directory / WEIGHTS_NAME) as tmp:
        # One metadata key: safetensors writes several in a random order (safetensors issue
        # #584), and the same parameters must give the same bytes, so checksums compare runs.
        save_file(
            {WEIGHT_KEY: np.ascontiguousarray(weight)},
            str(tmp),
            metadata={"psp_format_version": str(FORMAT_VERSION)},
        )
    with atomic_path(directory / SPM_NAME) as tmp:
        tmp.write_bytes(spm_bytes)
    with atomic_path(directory / CONFIG_NAME) as tmp:
        tmp.write_text(config.to_json(), encoding="utf-8")
    return directory
