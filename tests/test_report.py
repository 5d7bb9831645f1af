"""The run's report on a small hand-written results/ folder: every paper table's cells come from
the right model, each figure has its floor beside it, and what is missing is said."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from psp.evaluate.markdown import MISSING, fmt
from psp.evaluate.results import TIDY_COLUMNS
from psp.io import InputError
from psp.report import ReportInputs, write_report
from psp.report.pages import PAGE_INTRO
from psp.report.stage_tables import corpora_cell
from tests.test_tables import eval_rows, find, md_table, write_eval_dir

LANGUAGES = {"en": ["en", "en"], "es-en": ["es", "en"], "ar-en": ["ar", "en"]}
TRACKS = {
    "en": ["en-en"],
    "es-en": ["es-es", "es-en", "es-en-WMT", "en-en"],
    "ar-en": ["ar-ar", "ar-en", "en-en"],
}
CODES = {"en": [], "es-en": ["spa"], "ar-en": ["ara"]}
ALL_TRACKS = ["ar-ar", "ar-en", "es-es", "es-en", "es-en-WMT", "en-en", "tr-en"]


def write_json(path: Path, content: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    return path


@pytest.fixture
def run(tmp_path) -> dict:
    """Three models; en and es-en with floors, ar-en without; one peer on every track and
    on deu, which no trained model covers, as tr-en is not."""
    results = tmp_path / "results"
    rows, inputs = {}, {"evals": [], "floors": [], "peers": []}
    for i, model in enumerate(LANGUAGES):
        rows[model] = eval_rows(40.0 + 10 * i, TRACKS[model], CODES[model])
        write_eval_dir(results / "eval" / model, rows[model])
        inputs["evals"].append(results / "eval" / model / "metrics.json")
        if model != "ar-en":
            rows[f"floor {model}"] = eval_rows(5.0 + i, TRACKS[model], CODES[model])
            write_eval_dir(results / "eval/untrained" / model, rows[f"floor {model}"])
            inputs["floors"].append(results / "eval/untrained" / model / "metrics.json")
    rows["mini"] = eval_rows(70.0, ALL_TRACKS, ["spa", "ara", "deu"])
    write_eval_dir(results / "eval/peers/mini", rows["mini"])
    inputs["peers"].append(results / "eval/peers/mini/metrics.json")

    removed = {"length": 30, "trigram": 10, "langid": 0, "duplicate": 0}
    inputs["data_stats"] = [
        write_json(
            results / "data" / model / "filter_stats.json",
            {"lines_in": 100 + i, "kept": 60 + i, "removed": removed | {"langid": i}},
        )
        for i, model in enumerate(LANGUAGES)
    ]
    inputs["spm_stats"] = [
        write_json(
            results / "spm/es-en.stats.json",
            {
                "model": "es-en",
                "vocab_size": 8000,
                "settings": {},
                "heldout": {
                    lang: {
                        "corpora": ["x"],
                        "lines": 1000,
                        "chars": 50000,
                        "unknown_chars": 5,
                        "unknown_char_share": share,
                        "lines_with_unknown": 4,
                        "line_share": 0.004,
                        "unknown_digits": [],
                        "top_unknown": [["«", 3], ["|", 2]],
                    }
                    for lang, share in (("es", 0.0001), ("en", 0.00002))
                },
            },
        )
    ]
    inputs["bucc"] = [
        write_json(
            results / "bucc/es-en/bucc.json",
            {
                split: {
                    "threshold": t,
                    "precision": p,
                    "recall": r,
                    "f1": f,
                    "n_src": 300,
                    "n_tgt": 310,
                    "without_filters": {"threshold": t, "f1": f - 0.02},
                }
                for split, t, p, r, f in (
                    ("dev", 1.24, 0.9, 0.8, 0.847),
                    ("test", 1.24, 0.85, 0.75, 0.797),
                )
            },
        )
    ]
    mined = results / "mine/es-en/es-en.stats.json"
    write_json(
        mined,
        {
            "n_src": 50,
            "n_tgt": 60,
            "k": 4,
            "margin": "ratio",
            "retrieval": "max",
            "kept": 2,
            "threshold": 1.2,
            "candidates": 50,
            "above_threshold": 5,
            "removed": {"same_text": 1, "copy": 0, "length_ratio": 2},
        },
    )
    with gzip.open(mined.with_name("es-en.tsv.gz"), "wt") as handle:
        handle.write("1.5\thola | adiós\thello | bye\n1.3\tsí\tyes\n")
    inputs["mined"] = [mined]
    log = results / "train/en/train_log.tsv"
    log.parent.mkdir(parents=True)
    log.write_text(
        "event\tstep\tloss\tpairs_per_s\nstep\t10\t0.5\t100\nstep\t20\t0.25\t300\nepoch\t20\t\t\n"
    )
    inputs["train_logs"] = [log]
    corpora = {m: [f"bitext/{m}/corpus"] for m in LANGUAGES}
    return {
        "results": results,
        "rows": rows,
        "inputs": ReportInputs(languages=LANGUAGES, corpora=corpora, **inputs),
    }


def report(run, **changes) -> tuple[str, Path]:
    results = run["results"]
    inputs = run["inputs"]
    for key, value in changes.items():
        setattr(inputs, key, value)
    write_report(
        results / "report.md",
        inputs,
        page_path=results / "results.md",
        results_path=results / "tables/results.csv",
    )
    return (results / "report.md").read_text(), results


def beside(value: float, floor: float | None) -> str:
    return f"{fmt(value)} ({MISSING if floor is None else fmt(floor)})"


def test_table1_counts_filters_and_unknown_characters(run):
    text, _ = report(run)
    data = md_table(text, "## Table 1: training data").set_index("model")
    assert data.loc["es-en", "pairs in"] == "101" and data.loc["ar-en", "kept"] == "62"
    assert data.loc["en", "− length"] == "30" and data.loc["ar-en", "− langid"] == "2"
    assert (
        "− duplicate" not in data.columns and "No pair was removed by: invalid_utf8, empty" in text
    )
    assert data.loc["es-en", "corpora"] == "es-en: corpus"
    spm = md_table(text, "### Table 1b").set_index("language")
    assert (
        spm.loc["es", "unknown chars %"] == "0.010" and spm.loc["en", "unknown chars %"] == "0.002"
    )
    assert spm.loc["es", "vocabulary"] == "8,000"


def test_table2_puts_each_floor_below_its_model(run):
    text, _ = report(run)
    rows = run["rows"]
    table = md_table(text, "## Table 2").set_index("model")
    assert list(table.index) == [
        "en",
        "untrained en (floor)",
        "es-en",
        "untrained es-en (floor)",
        "ar-en",
        "peer mini",
    ]
    assert list(table.columns) == ["STS12", "STS13", "Avg", "STS-B test"]
    avg = find(rows["floor es-en"]["sts"], benchmark="avg", dataset="mean")["pearson"]
    assert table.loc["untrained es-en (floor)", "Avg"] == fmt(avg)
    stsb = find(rows["ar-en"]["sts"], benchmark="STSB", dataset="test")["pearson"]
    assert table.loc["ar-en", "STS-B test"] == fmt(stsb)
    detail = md_table(text, "### Table 2, per dataset").set_index(["year", "dataset"])
    assert sorted(detail.index) == [
        ("STS12", "NA"),
        ("STS12", "news0"),
        ("STS13", "NA"),
        ("STS13", "news1"),
    ]
    cell = (
        find(r["sts"], benchmark="STS13", dataset="news1")["pearson"]
        for r in (rows["en"], rows["floor en"])
    )
    assert detail.loc[("STS13", "news1"), "en"] == beside(*cell)
    assert detail.loc[("STS12", "news0"), "ar-en"].endswith(f"({MISSING})")
    assert "No untrained floor in this run for: ar-en." in text


def test_table3_scores_each_track_by_the_model_of_its_languages(run):
    text, _ = report(run)
    rows = run["rows"]
    table = md_table(text, "## Table 3").set_index("")
    assert list(table.columns) == ALL_TRACKS
    assert table.loc["scored by"].tolist() == [
        "ar-en",
        "ar-en",
        "es-en",
        "es-en",
        "es-en",
        "en",
        MISSING,
    ]
    track = lambda r, t: find(r["sts17"], track=t)["pearson"]  # noqa: E731
    assert table.loc["P-SP (floor)", "es-en-WMT"] == beside(
        track(rows["es-en"], "es-en-WMT"), track(rows["floor es-en"], "es-en-WMT")
    )
    assert table.loc["P-SP (floor)", "en-en"] == beside(
        track(rows["en"], "en-en"), track(rows["floor en"], "en-en")
    )
    assert table.loc["P-SP (floor)", "ar-ar"] == beside(track(rows["ar-en"], "ar-ar"), None)
    assert table.loc["P-SP (floor)", "tr-en"] == MISSING
    assert table.loc["peer mini", "tr-en"] == fmt(track(rows["mini"], "tr-en"))
    assert "Track tr-en: no trained model covers its languages." in text
    en = md_table(text, "### Table 3, en-en").set_index("model")
    assert list(en.index) == ["en", "es-en", "ar-en"]
    spearman = find(rows["es-en"]["sts17"], track="en-en")["spearman"]
    assert en.loc["es-en", "Spearman rho"] == beside(
        spearman, find(rows["floor es-en"]["sts17"], track="en-en")["spearman"]
    )


def test_table4_one_row_per_language_with_directions_below(run):
    text, _ = report(run)
    rows = run["rows"]
    table = md_table(text, "## Table 4").set_index("language")
    assert list(table.index) == ["es (spa)", "ar (ara)", "de (deu)"]
    assert table.loc["es (spa)", "model"] == "es-en" and table.loc["de (deu)", "model"] == MISSING
    spa = rows["es-en"]["tatoeba"][0]["mean_error"], rows["floor es-en"]["tatoeba"][0]["mean_error"]
    assert table.loc["es (spa)", "P-SP (floor)"] == beside(*spa)
    assert table.loc["de (deu)", "P-SP (floor)"] == MISSING
    assert table.loc["de (deu)", "peer mini"] == fmt(rows["mini"]["tatoeba"][2]["mean_error"])
    assert "de (deu): no trained model covers its language." in text
    detail = md_table(text, "### Table 4, per direction").set_index("language")
    assert list(detail.columns) == ["model", "xx→en", "en→xx", "mean"]
    assert detail.loc["ar (ara)", "en→xx"] == beside(
        rows["ar-en"]["tatoeba"][0]["en2xx_error"], None
    )


def test_mining_sections_and_speed_hook(run, tmp_path):
    text, _ = report(run)
    bucc = md_table(text, "## Mining quality").set_index("pair")
    assert (
        bucc.loc["es-en", "test F1"] == "79.7" and bucc.loc["es-en", "threshold (dev)"] == "1.2400"
    )
    assert bucc.loc["es-en", "test F1 without pair filters"] == "77.7"
    assert (
        "2 pairs at score ≥ 1.2 (of 50 candidates), after the pair filters removed of the 5 "
        "above it: same_text 1, length_ratio 2." in text
    )
    assert "![precision-recall of es-en](bucc/es-en/pr_curve.png)" in text
    top = md_table(text, "Top 10 pairs")
    assert top["source"].tolist() == ["hola \\| adiós", "sí"]
    assert "1 epochs, 20 steps, median 200 pairs/s, final loss 0.2500." in text
    assert "Table 5" not in text

    speed = tmp_path / "speed.csv"
    speed.write_text(
        "encoder,kind,threads,sentences_per_s,first_pass_per_s,load_s,peak_rss_mib,encoder_mib,"
        "sts_avg\n"
        "es-en,psp,1,51234.5,40000.0,0.12,210.4,96.2,61.23\n"
    )
    text, _ = report(run, speed=speed, speed_plot=tmp_path / "speed_quality.png")
    table = md_table(text, "## Table 5").set_index("encoder")
    assert table.loc["es-en", "sentences/s"] == "51,234" and table.loc["es-en", "STS avg"] == "61.2"
    assert table.loc["es-en", "encoder MiB"] == "96"
    assert "![speed against quality](../speed_quality.png)" in text
    speed.write_text("encoder,threads\nx,1\n")
    with pytest.raises(InputError, match=rf"{speed}: missing column\(s\) kind"):
        report(run)


def test_results_page_and_tidy_results(run):
    text, results = report(run)
    page = (results / "results.md").read_text()
    assert page.startswith("# Results\n")
    for title in ("## Table 1", "## Table 2", "## Table 3", "## Table 4", "## Mining quality"):
        assert title in page
    assert "### Table 2, per dataset" in page and "## Training" not in page
    # The report's evaluation section is the page's tables with their figures.
    evaluation = text.split("## Evaluation\n", 1)[1].split("## Training\n", 1)[0]
    tables = page.split(f"{PAGE_INTRO}\n\n", 1)[1]
    assert "![" not in page
    assert [line for line in evaluation.splitlines() if line and not line.startswith("![")] == [
        line for line in tables.splitlines() if line
    ]
    tidy = pd.read_csv(results / "tables/results.csv", keep_default_na=False)
    assert tuple(tidy.columns) == TIDY_COLUMNS
    assert set(tidy["kind"]) == {"trained", "floor", "peer"}
    es = tidy[(tidy["model"] == "es-en") & (tidy["kind"] == "floor") & (tidy["task"] == "spa")]
    floor = run["rows"]["floor es-en"]["tatoeba"][0]
    assert dict(zip(es["metric"], es["value"], strict=True)) == pytest.approx(
        {m: floor[m] for m in ("xx2en_error", "en2xx_error", "mean_error")}, abs=1e-4
    )


def test_missing_inputs_are_named(run):
    missing = run["results"] / "eval/fr-en/metrics.json"
    with pytest.raises(FileNotFoundError, match="eval/fr-en"):
        report(run, evals=[*run["inputs"].evals, missing])
    with pytest.raises(ValueError, match="no languages given for model 'es-en'"):
        report(run, languages={"en": ["en", "en"]}, evals=run["inputs"].evals[:2])


def test_corpora_cell_groups_ids_by_folder():
    ids = [
        "paraphrase/parasci/acl-train",
        "paraphrase/parasci/arxiv-val",
        "bitext/es-en/wmt-newstest",
        "bitext/es-en/un-v1.0-dev-test",
        "bitext/de-en/wmt-newstest",
    ]
    assert corpora_cell(ids) == (
        "parasci: acl-train, arxiv-val; es-en: wmt-newstest, un-v1.0-dev-test; de-en: wmt-newstest"
    )
    assert corpora_cell([]) == "–"
