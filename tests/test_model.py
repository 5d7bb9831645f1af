"""PSPModel: embedding semantics, save/load round trips and load-time error messages."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import psp
from psp.data.spm_training import train_spm
from psp.io import InputError
from psp.model.directory import ModelConfig
from psp.model.piece_encoder import PieceEncoder
from psp.model.pooling import load_table_model
from psp.model.torch_model import PSPModel, load

DIM = 32


@pytest.fixture(scope="module")
def model(spm_path) -> PSPModel:
    return PSPModel.from_spm(spm_path, DIM, seed=3, languages=["en"])


@pytest.fixture(scope="module")
def saved(model, tmp_path_factory):
    return model.save(tmp_path_factory.mktemp("model") / "m")


def manual_mean(model: PSPModel, sentence: str) -> np.ndarray:
    """Mean of the table rows of the sentence's ids, computed independently of
    :func:`psp.model.pooling.mean_pool` (zero for a sentence with no known piece)."""
    ids, _ = model.encoder.encode([sentence])
    if np.isin(ids, model.encoder.textless_ids).all():
        return np.zeros(model.dim, dtype=np.float32)
    return model.embedding.weight.detach().numpy()[ids].mean(axis=0)


def test_embed_shape_dtype_order_across_batches(model, news):
    sentences = news[:50] + ["", "THE Cat."]
    out = model.embed(sentences, batch_size=7)
    assert out.shape == (len(sentences), DIM)
    assert out.dtype == np.float32
    expected = np.stack([manual_mean(model, s) for s in sentences])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out, model.embed(sentences, batch_size=1000))


def test_threads_and_output_arrays_give_the_same_bits(model, news):
    """Chunks tokenised and pooled on several threads, into a given float32 or float64 array:
    the bits of one thread (the sums are float32 in every case)."""
    sentences = news[:2000] + ["", "THE Cat."]
    one = model.embed(sentences, num_threads=1)
    for threads in (2, 3):
        np.testing.assert_array_equal(model.embed(sentences, num_threads=threads), one)
    wide = np.empty((len(sentences), DIM), dtype=np.float64)
    assert model.embed(sentences, num_threads=2, out=wide) is wide
    np.testing.assert_array_equal(wide, one.astype(np.float64))


def test_lone_string_gives_vector(model, news):
    vector = model.embed(news[0])
    assert vector.shape == (DIM,)
    np.testing.assert_allclose(vector, model.embed([news[0]])[0], rtol=1e-6)


def test_empty_input(model):
    assert model.embed([]).shape == (0, DIM)


def test_sentence_without_known_piece_is_the_zero_vector(model):
    for text in ["", "   ", "ꙮꙮ ҈҈"]:
        np.testing.assert_array_equal(model.embed(text), np.zeros(DIM, dtype=np.float32))
    assert model.score("", "") == model.score("ꙮꙮ", "҈҈") == 0


def test_lowercasing(model):
    np.testing.assert_array_equal(
        model.embed("The Senate Voted."), model.embed("the senate voted.")
    )


def test_max_pieces_truncates(spm_path, news):
    model = PSPModel.from_spm(spm_path, DIM, seed=3, max_pieces=2)
    full = PieceEncoder(spm_path)
    ids, offsets = full.encode([news[0]])
    assert offsets[1] > 2
    expected = model.embedding.weight.detach().numpy()[ids[:2]].mean(axis=0)
    np.testing.assert_allclose(model.embed(news[0]), expected, rtol=1e-5, atol=1e-6)


def test_normalize(model, news):
    out = model.embed(news[:10], normalize=True)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)


def test_num_threads_restored(model, news):
    before = torch.get_num_threads()
    model.embed(news[:10], num_threads=1)
    assert torch.get_num_threads() == before


def test_from_spm_seeded(spm_path):
    a = PSPModel.from_spm(spm_path, DIM, seed=5).embedding.weight
    b = PSPModel.from_spm(spm_path, DIM, seed=5).embedding.weight
    c = PSPModel.from_spm(spm_path, DIM, seed=6).embedding.weight
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_untrained_baseline_reflects_piece_overlap(model, news):
    """Random piece vectors: a sentence is closer to a word-dropped copy than to other sentences."""
    sentences = news[100:140]
    dropped = [" ".join(s.split()[1:]) for s in sentences]
    same = model.score(sentences, dropped)
    other = model.score(sentences, sentences[1:] + sentences[:1])
    assert np.mean(same) > np.mean(other) + 0.3


def test_score_is_cosine_of_embed(model, news):
    a, b = news[:20], news[20:40]
    ea, eb = model.embed(a), model.embed(b)
    expected = (ea * eb).sum(1) / np.linalg.norm(ea, axis=1) / np.linalg.norm(eb, axis=1)
    np.testing.assert_allclose(model.score(a, b, batch_size=6), expected, rtol=1e-5, atol=1e-6)
    assert model.score(news[0], news[0]) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="as many"):
        model.score(a, b[:-1])


def test_save_load_float32_exact(model, saved, news):
    loaded = psp.load(saved)
    assert loaded.config == model.config
    assert loaded.config.provenance["spm_sha256"] == model.encoder.sha256
    assert torch.equal(loaded.embedding.weight, model.embedding.weight)
    np.testing.assert_array_equal(loaded.embed(news[:30]), model.embed(news[:30]))


def test_the_same_parameters_save_to_the_same_bytes(model, tmp_path):
    """Two runs that train the same parameters must write files with one checksum."""
    for k in range(8):
        model.save(tmp_path / str(k))
    for name in ("embeddings.safetensors", "config.json", "sentencepiece.model"):
        assert len({(tmp_path / str(k) / name).read_bytes() for k in range(8)}) == 1, name


def test_save_load_float16_close(model, news, tmp_path):
    model.save(tmp_path / "half", float16=True)
    loaded = load(tmp_path / "half")
    assert loaded.embedding.weight.dtype == torch.float32
    weights = (tmp_path / "half" / "embeddings.safetensors").stat().st_size
    assert weights < model.config.vocab_size * DIM * 4 * 0.6
    np.testing.assert_allclose(loaded.embed(news[:30]), model.embed(news[:30]), rtol=0, atol=3e-3)


def test_inference_maps_the_table_and_a_torch_model_gets_its_own(model, saved, news, tmp_path):
    """``psp embed``'s model reads its float32 table from the file's pages, read-only; the torch
    model, which may be trained on, has a private copy; a float16 table is upcast into one."""
    mapped = load_table_model(saved)
    assert not mapped.table.flags.writeable and not mapped.table.flags.owndata
    with pytest.raises(ValueError, match="read-only"):
        mapped.table[0, 0] = 1.0
    np.testing.assert_array_equal(mapped.embed(news[:30]), model.embed(news[:30]))
    trainable = load(saved)
    with torch.no_grad():
        trainable.embedding.weight.add_(1.0)  # its own memory: the file is left as it was
    np.testing.assert_array_equal(load_table_model(saved).table, mapped.table)
    model.save(tmp_path / "half", float16=True)
    half = load_table_model(tmp_path / "half")
    assert half.table.dtype == np.float32 and half.table.flags.owndata


def copy_model(saved, tmp_path):
    target = tmp_path / "copy"
    target.mkdir()
    for file in saved.iterdir():
        (target / file.name).write_bytes(file.read_bytes())
    return target


@pytest.mark.parametrize("name", ["config.json", "sentencepiece.model", "embeddings.safetensors"])
def test_load_missing_file_named(saved, tmp_path, name):
    target = copy_model(saved, tmp_path)
    (target / name).unlink()
    with pytest.raises(InputError, match=name):
        load(target)


def test_load_swapped_tokenizer_named(saved, tmp_path, news):
    target = copy_model(saved, tmp_path)
    train_spm(news[:2000], target / "sentencepiece.model", vocab_size=500, seed=1)
    with pytest.raises(InputError, match="sentencepiece.model.*sha256"):
        load(target)


@pytest.mark.parametrize("loader", [load, load_table_model])
def test_load_truncated_weights_named(saved, tmp_path, loader):
    target = copy_model(saved, tmp_path)
    data = (target / "embeddings.safetensors").read_bytes()
    (target / "embeddings.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="embeddings.safetensors"):
        loader(target)


def test_load_shape_mismatch_named(saved, tmp_path):
    target = copy_model(saved, tmp_path)
    config = json.loads((target / "config.json").read_text())
    config["dim"] = DIM + 1
    (target / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match=r"embeddings.safetensors.*shape"):
        load(target)


def test_config_unknown_key_rejected():
    text = ModelConfig(dim=4, vocab_size=10).to_json()
    assert ModelConfig.from_json(text) == ModelConfig(dim=4, vocab_size=10)
    data = json.loads(text)
    data["hidden_dim"] = 7
    with pytest.raises(InputError, match="m/config.json.*hidden_dim"):
        ModelConfig.from_json(json.dumps(data), where="m/config.json")
    with pytest.raises(InputError, match="missing.*vocab_size"):
        ModelConfig.from_json(json.dumps({"dim": 4}))


def test_config_fast_check_accepts_only_what_jsonschema_accepts():
    """Loading a model checks ``config.json`` without importing jsonschema when the config is
    plainly valid; the shortcut must never pass a value jsonschema refuses, and must pass the
    configs psp writes."""
    from jsonschema import Draft202012Validator

    from psp.model.directory import CONFIG_SCHEMA, _plainly_fits

    validator = Draft202012Validator(CONFIG_SCHEMA)
    base = json.loads(ModelConfig(dim=4, vocab_size=10, max_pieces=3, languages=["es"]).to_json())
    assert _plainly_fits(CONFIG_SCHEMA, base)
    assert _plainly_fits(CONFIG_SCHEMA, json.loads(ModelConfig(dim=1, vocab_size=1).to_json()))
    values = [0, 1, -1, 7, 2.0, 2.5, True, False, None, "7", "x", [], ["es"], [1], ["a", None]]
    values += [{}, {"a": 1}, float("nan")]
    for key in base:
        for value in values:
            data = base | {key: value}
            if _plainly_fits(CONFIG_SCHEMA, data):
                assert validator.is_valid(data), (key, value)
    assert not _plainly_fits({"type": "integer", "maximum": 3}, 1)  # unknown keyword: ask


def test_embed_into_out_buffer(model, news):
    buffer = np.full((12, DIM), np.nan, dtype=np.float32)
    result = model.embed(news[:12], batch_size=5, out=buffer)
    assert result is buffer
    np.testing.assert_array_equal(buffer, model.embed(news[:12]))
    with pytest.raises(ValueError, match="shape"):
        model.embed(news[:3], out=buffer)


def test_half_rows_rounds_as_numpy_casts():
    """The float16 rows ``psp embed --float16`` and float16 mining shards write: numpy's bits for
    random float32 bit patterns, both signs of the rounding edges, infinities and NaN."""
    from psp.model.pooling import half_rows

    rng = np.random.default_rng(4)
    edges = np.array(
        [0, 1, 0x33000000, 0x33000001, 0x387FFFFF, 0x38800000, 0x477FE000, 0x477FEFFF]
        + [0x477FF000, 0x47800000, 0x7F800000, 0x7F800001, 0x7FC00000, 0x37FFFFFF],
        dtype=np.uint32,
    )
    bits = np.concatenate(
        [rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32), edges]
    )
    bits = np.concatenate([bits, bits | np.uint32(0x80000000)]).reshape(-1, 4)
    x = bits.view(np.float32)
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16)
    got = half_rows(x, np.empty(x.shape, dtype=np.float16))
    nan = np.isnan(x)
    assert np.array_equal(got.view(np.uint16)[~nan], expected.view(np.uint16)[~nan])
    assert np.isnan(got[nan]).all()


@pytest.mark.parametrize("dim", [1024, 37])
def test_every_pooling_build_adds_rows_in_order(dim):
    """The compiled pooling loop, in each build this machine has (the baseline one and, on an
    x86-64 CPU with AVX2, the AVX2 one that embedding then takes), gives the bits of adding a
    sentence's rows one after the other in float32 and dividing by their count: 1 to 9 pieces
    (the four-rows-a-pass path and its remainders), and zeros for a sentence of textless ids."""
    from psp.model import _loops, pooling

    rng = np.random.default_rng(7)
    table = rng.standard_normal((50, dim)).astype(np.float32)
    textless = np.array([0, 1], dtype=np.int64)
    sentences = [rng.integers(2, 50, n).astype(np.int32) for n in range(1, 10)]
    sentences += [np.array([0, 1, 0], dtype=np.int32), np.array([1, 7], dtype=np.int32)]
    ids = np.concatenate(sentences)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sentences])]).astype(np.int64)
    expected = np.zeros((len(sentences), dim), dtype=np.float32)
    for row, pieces in zip(expected, sentences, strict=True):
        if np.isin(pieces, textless).all():
            continue
        for piece in pieces:
            row += table[piece]
        row /= np.float32(len(pieces))
    builds = [_loops.pool]
    if _loops.cpu_has_avx2():
        from psp.model import _loops_avx2

        builds.append(_loops_avx2.pool)
        assert pooling._POOL is _loops_avx2.pool
    for build in builds:
        out = np.full((len(sentences), dim), np.nan, dtype=np.float32)
        build(table, ids, offsets, textless, out, 0, len(sentences))
        assert np.array_equal(out.view(np.uint32), expected.view(np.uint32)), build.__module__
