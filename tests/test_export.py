"""``psp export``: the exported directories load in sentence-transformers and model2vec with no
code of ours and embed as ``psp embed`` on every STS-B and Tatoeba line of the mirror."""

from __future__ import annotations

import gzip
import importlib.util
import json

import numpy as np
import pytest

from psp.cli import main
from psp.export import EXPORT_FILES, export_model
from psp.export.check import compare_ids, compare_vectors, mirror_lines, psp_vectors
from psp.export.model_card import split_card
from psp.export.tokenizer import build_tokenizer
from psp.io import InputError

needs_st = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None,
    reason="sentence-transformers not installed (pip install 'psp-mine[peers]')",
)
needs_m2v = pytest.mark.skipif(
    importlib.util.find_spec("model2vec") is None,
    reason="model2vec not installed (pip install 'psp-mine[peers]')",
)
#: Bitext models: each language's SentencePiece model is trained on the mirror's wmt-newstest
#: (ar: UN) pairs, as a workflow model is, and checked on its own Tatoeba side and English.
BITEXT = {
    "es": "wmt-newstest",
    "tr": "wmt-newstest",
    "zh": "wmt-newstest",
    "ar": "un-v1.0-dev-test",
}


def bitext_lines(shared_data, lang: str) -> list[str]:
    corpus = BITEXT[lang]
    lines = []
    for side in (lang, "en"):
        with gzip.open(shared_data / f"bitext/{lang}-en/{corpus}.{side}.gz", "rt") as handle:
            lines += [line.rstrip("\n") for line, _ in zip(handle, range(6000), strict=False)]
    return lines


@pytest.fixture(scope="module")
def bitext_models(shared_data, tmp_path_factory):
    """A random-table model over a SentencePiece model per language, trained as the workflow
    trains them (full character coverage but for zh's 0.9995, the required characters)."""
    from psp.data.spm_training import REQUIRED_CHARS, train_spm
    from psp.model.torch_model import PSPModel

    root = tmp_path_factory.mktemp("bitext")
    models = {}
    for lang in BITEXT:
        spm = train_spm(
            bitext_lines(shared_data, lang),
            root / f"{lang}.model",
            vocab_size=4000 if lang == "zh" else 2000,
            character_coverage=0.9995 if lang == "zh" else 1.0,
            required_chars=REQUIRED_CHARS,
        )
        models[lang] = PSPModel.from_spm(spm, dim=8, seed=1, languages=[lang, "en"]).save(
            root / f"{lang}-en"
        )
    return models


@pytest.mark.parametrize("lang", ["en", *BITEXT])
def test_tokenizer_gives_sentencepiece_ids_on_the_mirror(
    lang, tiny_model, bitext_models, shared_data
):
    model = tiny_model if lang == "en" else bitext_models[lang]
    languages = ["en"] if lang == "en" else [lang, "en"]
    lines = mirror_lines(shared_data, languages)
    assert len(lines) > 100_000  # STS-B's 17,256 sentences and every Tatoeba English side
    tokenizer = build_tokenizer((model / "sentencepiece.model").read_bytes(), lowercase=True)
    found = compare_ids(model, tokenizer, lines)
    assert found["share"] >= 0.999, found["exceptions"][:5]
    # The exceptions are ties between segmentations of equal score: the same pieces.
    assert all(e["same_pieces"] for e in found["exceptions"]), found["exceptions"][:5]


@needs_st
@needs_m2v
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_exports_embed_as_psp_embed_on_the_mirror(
    lang, tiny_model, bitext_models, shared_data, tmp_path
):
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

    model = tiny_model if lang == "en" else bitext_models[lang]
    lines = mirror_lines(shared_data, ["en"] if lang == "en" else [lang, "en"])
    reference = psp_vectors(model, lines)
    st_dir = export_model(model, tmp_path / "st", library="sentence-transformers")
    m2v_dir = export_model(model, tmp_path / "m2v", library="model2vec")
    for library, vectors in (
        ("st", SentenceTransformer(str(st_dir), device="cpu").encode(lines, batch_size=256)),
        ("m2v", StaticModel.from_pretrained(m2v_dir).encode(lines)),
    ):
        found = compare_vectors(reference, np.asarray(vectors, dtype=np.float32), lines)
        assert found["below"] == [] and found["min_cosine"] >= 0.9999, (library, found["below"][:5])
        # A row psp leaves at zero has no known piece; the library averages the bare "▁" such
        # characters leave: only text whose every word is unknown, never in these files.
        assert found["zero_rows_nonzero"] == [], library
        low, high = found["norm_ratio"]
        assert high == pytest.approx(1.0, abs=1e-5)
        if library == "m2v":  # model2vec drops <unk> as psp does: the same norms
            assert low == pytest.approx(1.0, abs=1e-5)


@needs_st
@needs_m2v
def test_unknown_pieces_keep_the_direction_and_scale_the_norm(tiny_model, tmp_path):
    """psp drops <unk>; StaticEmbedding averages its zero row: the same direction, the norm
    scaled by known / (known + unknown); model2vec drops it too. A sentence of unknown
    characters only is psp's zero vector; the libraries give the bare boundary's row."""
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

    from psp.model.pooling import load_table_model

    sentences = ["the ж court said ж ж", "жжж ж"]
    psp_model = load_table_model(tiny_model)
    ids, offsets = psp_model.encoder.encode(sentences)
    reference = psp_vectors(tiny_model, sentences)
    st = SentenceTransformer(
        str(export_model(tiny_model, tmp_path / "st", library="sentence-transformers"))
    ).encode(sentences)
    m2v = StaticModel.from_pretrained(
        export_model(tiny_model, tmp_path / "m2v", library="model2vec")
    ).encode(sentences)
    tokenizer = build_tokenizer((tiny_model / "sentencepiece.model").read_bytes(), lowercase=True)
    pieces = tokenizer.encode(sentences[0], add_special_tokens=False).ids
    known = offsets[1] - offsets[0]
    assert len(pieces) > known  # the <unk> pieces psp left out
    ratio = np.linalg.norm(st[0]) / np.linalg.norm(reference[0])
    assert ratio == pytest.approx(known / len(pieces), rel=1e-5)
    assert (
        np.dot(st[0], reference[0]) / np.linalg.norm(st[0]) / np.linalg.norm(reference[0]) > 0.9999
    )
    assert np.allclose(m2v[0], reference[0], atol=1e-6)
    assert not reference[1].any() and st[1].any() and m2v[1].any()
    boundary = psp_model.table[psp_model.encoder.boundary_id]
    assert np.allclose(m2v[1], boundary, atol=1e-6)


def test_export_writes_each_librarys_files_and_card(tiny_model, tmp_path):
    for library, files in EXPORT_FILES.items():
        out = tmp_path / library
        assert main(["export", "--model", str(tiny_model), "--to", library, str(out)]) == 0
        assert sorted(
            p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()
        ) == sorted(files)
        metadata, body = split_card((out / "README.md").read_text(encoding="utf-8"), "card")
        assert metadata["library_name"] == library and library in metadata["tags"]
        assert metadata["language"] == ["es", "en"]
        assert "## Use" in body and ("StaticModel" in body) == (library == "model2vec")
    config = json.loads((tmp_path / "model2vec" / "config.json").read_text())
    assert config["normalize"] is False and config["max_length"] is None
    from safetensors.numpy import load_file

    table = load_file(str(tmp_path / "model2vec" / "model.safetensors"))["embeddings"]
    assert not table[0].any() and table[1:].any(1).all()  # <unk> (id 0) is the zero row


def test_export_errors_name_the_input(tiny_model, tmp_path, capsys):
    assert (
        main(
            ["export", "--model", str(tmp_path / "none"), "--to", "model2vec", str(tmp_path / "o")]
        )
        == 2
    )
    assert "model directory not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["export", "--model", str(tiny_model), "--to", "onnx", str(tmp_path / "o")])


def test_tokenizer_refuses_what_it_cannot_reproduce(news, tmp_path):
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(news[:2000]),
        model_prefix=str(tmp_path / "bpe"),
        model_type="bpe",
        vocab_size=300,
        minloglevel=2,
    )
    with pytest.raises(InputError, match=r"bpe\.model: cannot export this tokenizer: model type"):
        build_tokenizer(tmp_path / "bpe.model", lowercase=True)
    (tmp_path / "junk.model").write_bytes(b"\xff\x00junk")
    with pytest.raises(InputError, match="junk.model: not a SentencePiece model"):
        build_tokenizer(tmp_path / "junk.model", lowercase=True)


def test_format_characters_are_deleted_as_psp_deletes_them(tiny_model):
    tokenizer = build_tokenizer((tiny_model / "sentencepiece.model").read_bytes(), lowercase=True)
    from psp.model.pooling import load_table_model

    encoder = load_table_model(tiny_model).encoder
    text = "The\u00ad Court\u200b said\ufeff  SOME\u200dthing \U000e0041 ok \u064e\u0640s"
    ids, _ = encoder.encode([text])
    assert tokenizer.encode(text, add_special_tokens=False).ids == ids.tolist()
