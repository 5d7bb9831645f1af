"""Model cards: the Hugging Face metadata header and the figures come from the model's own files."""

from __future__ import annotations

import pytest

from psp.evaluate.markdown import fmt
from psp.export.model_card import export_card, split_card, write_model_card
from psp.io import InputError
from tests.test_tables import eval_rows, find, write_eval_dir


@pytest.fixture
def evaluated(tiny_model, tmp_path):
    rows = eval_rows(40.0, ["es-es", "en-en"], ["spa"])
    return write_eval_dir(tmp_path / "eval" / "es-en", rows), rows


def test_card_header_and_figures_come_from_config_and_evaluation(tiny_model, evaluated):
    eval_dir, rows = evaluated
    card = write_model_card(tiny_model, corpora=["bitext/es-en/ntrex128"], eval_dir=eval_dir)
    metadata, body = split_card(card.read_text(encoding="utf-8"), str(card))
    assert metadata["language"] == ["es", "en"]
    assert metadata["license"] == "cc-by-sa-4.0"  # NTREX-128's one licence
    assert metadata["datasets"] == ["bitext/es-en/ntrex128"]
    assert metadata["library_name"] == "psp-mine"
    (index,) = metadata["model-index"]
    results = {r["dataset"]["type"]: r for r in index["results"]}
    stsb = find(rows["sts"], benchmark="STSB", dataset="test")
    assert {m["type"]: m["value"] for m in results["STSB/test"]["metrics"]} == {
        "pearson": round(stsb["pearson"], 2),
        "spearman": round(stsb["spearman"], 2),
    }
    spa = find(rows["tatoeba"], code="spa")
    assert results["Tatoeba/spa"]["metrics"][0]["value"] == round(spa["mean_error"], 2)
    assert set(results) >= {"STS avg/mean", "STS17/es-es", "STS17/en-en"}
    assert f"| STSB | test | {fmt(stsb['pearson'])} | {fmt(stsb['spearman'])} |" in body
    assert "| bitext/es-en/ntrex128 | CC BY-SA 4.0 |" in body
    assert "psp.load(" in body and "Untrained" not in body


def test_mixed_licences_and_an_untrained_floor(tiny_model, evaluated):
    eval_dir, _ = evaluated
    corpora = ["bitext/es-en/ntrex128", "bitext/es-en/tico19-test", "no/such/corpus"]
    card = write_model_card(tiny_model, corpora=corpora, eval_dir=eval_dir, untrained=True)
    metadata, body = split_card(card.read_text(encoding="utf-8"), str(card))
    assert metadata["license"] == "other" and metadata["license_name"] == "training-data-terms"
    assert "| bitext/es-en/tico19-test | CC0 |" in body and "| no/such/corpus | ? |" in body
    assert body.startswith("# es-en\n\nUntrained floor")


def test_export_card_keeps_the_figures_and_swaps_the_library(tiny_model, evaluated):
    from psp.model.pooling import load_table_model

    eval_dir, _ = evaluated
    source = write_model_card(tiny_model, corpora=["bitext/es-en/ntrex128"], eval_dir=eval_dir)
    original, original_body = split_card(source.read_text(encoding="utf-8"), str(source))
    config = load_table_model(tiny_model).config
    metadata, body = split_card(export_card(tiny_model, config, library="model2vec"), "export")
    assert metadata["model-index"] == original["model-index"]
    assert metadata["library_name"] == "model2vec" and "model2vec" in metadata["tags"]
    assert "StaticModel.from_pretrained" in body and "psp.load(" not in body
    assert body.split("## Training data")[1] == original_body.split("## Training data")[1]


def test_a_broken_header_names_the_file():
    with pytest.raises(InputError, match="README.md: no '---' metadata header"):
        split_card("# no header\n", "README.md")
    with pytest.raises(InputError, match="card.md: metadata header is not YAML"):
        split_card("---\nkey: [unclosed\n---\nbody\n", "card.md")
