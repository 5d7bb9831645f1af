"""Evaluation result files, their tidy form and the tables.md of one embedder or several side by
side, on hand-written dirs."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from psp.evaluate import Sts17Evaluator, StsEvaluator, TatoebaEvaluator, combine_tables
from psp.evaluate.markdown import MISSING, fmt
from psp.evaluate.paper_tables import FLOOR_LABEL
from psp.evaluate.results import TIDY_COLUMNS, read_table, tidy_eval_dir, write_rows
from psp.io import InputError

YEARS = ("STS12", "STS13")


def md_table(text: str, heading: str) -> pd.DataFrame:
    """The first Markdown table after the line starting with ``heading``, cells as text."""
    after = text.split(heading, 1)[1].splitlines()[1:]
    rows = itertools.takewhile(
        lambda line: line.startswith("|"),
        itertools.dropwhile(lambda line: not line.startswith("|"), after),
    )
    # A cell's own "|" is escaped as "\\|".
    cells = [[cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip()[1:-1])] for row in rows]
    return pd.DataFrame(cells[2:], columns=cells[0])


def eval_rows(base: float, tracks=(), codes=()) -> dict[str, list[dict]]:
    """Evaluator rows whose every score is distinct and derived from ``base``."""
    score = itertools.count(base, 1.25)
    sts = []
    for i, year in enumerate(YEARS):
        for dataset in (f"news{i}", "NA", "mean", "all"):
            sts.append({"benchmark": year, "dataset": dataset, "n_pairs": 10})
    sts += [{"benchmark": "avg", "dataset": d, "n_pairs": 40} for d in ("mean", "all")]
    sts += [{"benchmark": "STSB", "dataset": s, "n_pairs": 5} for s in ("dev", "test")]
    for row in sts:
        row |= {"pearson": next(score), "spearman": next(score)}
    sts17 = [{"track": t, "lang1": "", "lang2": "", "n_pairs": 3} for t in tracks]
    for row in sts17:
        row |= {"pearson": next(score), "spearman": next(score)}
    tatoeba = [{"language": c, "code": c, "n_pairs": 4} for c in codes]
    for row in tatoeba:
        row |= {"xx2en_error": next(score), "en2xx_error": next(score), "mean_error": next(score)}
    return {"sts": sts, "sts17": sts17, "tatoeba": tatoeba}


def write_eval_dir(path: Path, rows: dict[str, list[dict]]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for evaluator in (StsEvaluator, Sts17Evaluator, TatoebaEvaluator):
        write_rows(path / f"{evaluator.table}.csv", evaluator.columns, rows[evaluator.table])
    (path / "metrics.json").write_text('{"speed": null}\n')
    return path


def find(rows: list[dict], **where) -> dict:
    return next(r for r in rows if all(r[k] == v for k, v in where.items()))


def test_rows_round_trip_keeps_names_text_and_nan(tmp_path):
    rows = eval_rows(10.0)["sts"]
    rows[0]["pearson"] = math.nan
    write_rows(tmp_path / "sts.csv", StsEvaluator.columns, rows)
    frame = read_table(tmp_path / "sts.csv")
    assert frame["dataset"].tolist() == [r["dataset"] for r in rows]  # "NA" stays a name
    assert math.isnan(frame["pearson"].iloc[0])
    assert frame["spearman"].tolist() == pytest.approx([r["spearman"] for r in rows])
    assert frame["n_pairs"].tolist() == [r["n_pairs"] for r in rows]


@pytest.mark.parametrize(
    "content, message",
    [("", "empty result file"), ("benchmark,dataset,pearson\nSTS12,a,high\n", "high")],
)
def test_bad_result_file_names_the_file(tmp_path, content, message):
    path = tmp_path / "sts.csv"
    path.write_text(content)
    with pytest.raises(InputError, match=rf"{path}.*{message}"):
        read_table(path)


def test_tidy_eval_dir_one_row_per_task_and_metric(tmp_path):
    rows = eval_rows(20.0, tracks=["es-en"], codes=["spa"])
    tidy = tidy_eval_dir(write_eval_dir(tmp_path / "es-en", rows), "es-en", "floor")
    assert tuple(tidy.columns) == TIDY_COLUMNS
    assert set(tidy["kind"]) == {"floor"} and set(tidy["model"]) == {"es-en"}
    assert len(tidy) == 2 * len(rows["sts"]) + 2 * len(rows["sts17"]) + 3 * len(rows["tatoeba"])
    indexed = tidy.set_index(["benchmark", "task", "metric"])["value"]
    assert (
        indexed[("STS avg", "mean", "pearson")]
        == find(rows["sts"], benchmark="avg", dataset="mean")["pearson"]
    )
    assert indexed[("STS17", "es-en", "spearman")] == rows["sts17"][0]["spearman"]
    assert indexed[("Tatoeba", "spa", "en2xx_error")] == rows["tatoeba"][0]["en2xx_error"]
    with pytest.raises(FileNotFoundError, match="nowhere"):
        tidy_eval_dir(tmp_path / "nowhere", "x")


def test_combine_tables_side_by_side_with_floor(tmp_path):
    small = eval_rows(10.0, tracks=["en-en", "es-en"], codes=["spa"])
    big = eval_rows(50.0, tracks=["en-en"], codes=["spa"])
    floor = eval_rows(1.0, tracks=["en-en", "es-en"], codes=["spa"])
    floor["sts"][0]["pearson"] = math.nan  # constant predictions
    dirs = {
        n: write_eval_dir(tmp_path / n, r)
        for n, r in (("small", small), ("big", big), ("random", floor))
    }
    text = combine_tables({"small": dirs["small"], "big": dirs["big"]}, floor=dirs["random"])

    by_year = md_table(text, "## Table 2").set_index("model")
    assert list(by_year.index) == ["small", "big", FLOOR_LABEL]
    assert list(by_year.columns) == [*YEARS, "Avg", "STS-B test"]
    assert by_year.loc["big", "STS-B test"] == fmt(
        find(big["sts"], benchmark="STSB", dataset="test")["pearson"]
    )
    for name, rows in (("small", small), ("big", big)):
        for year in YEARS:
            assert by_year.loc[name, year] == fmt(
                find(rows["sts"], benchmark=year, dataset="mean")["pearson"]
            )
    per_dataset = md_table(text, "### Table 2, per dataset").set_index(["year", "dataset"])
    assert set(per_dataset.index) == {
        (y, d) for y, i in zip(YEARS, "01") for d in (f"news{i}", "NA")
    }
    assert per_dataset.loc[("STS12", "news0"), FLOOR_LABEL] == "n/a"
    assert per_dataset.loc[("STS13", "NA"), "big"] == fmt(
        find(big["sts"], benchmark="STS13", dataset="NA")["pearson"]
    )

    sts17 = md_table(text, "## Table 3: SemEval-2017 STS (Pearson").set_index("model")
    assert list(sts17.columns) == ["es-en", "en-en"]  # the paper's order
    assert sts17.loc["big", "es-en"] == MISSING  # big was not evaluated on es-en
    assert sts17.loc["small", "es-en"] == fmt(small["sts17"][1]["pearson"])
    spearman = md_table(text, "### Table 3, Spearman").set_index("model")
    assert spearman.loc["small", "en-en"] == fmt(small["sts17"][0]["spearman"])

    tatoeba = md_table(text, "## Table 4").set_index(["language", "model"])
    assert list(tatoeba.columns) == ["xx→en", "en→xx", "mean"]
    assert tatoeba.loc[("es (spa)", "big"), "en→xx"] == fmt(big["tatoeba"][0]["en2xx_error"])
    assert tatoeba.loc[("es (spa)", FLOOR_LABEL), "mean"] == fmt(floor["tatoeba"][0]["mean_error"])
    assert "Embedding speed" not in text  # no metrics.json has a speed


def test_one_model_tables_use_plain_labels(tmp_path):
    rows = eval_rows(30.0, codes=["spa", "fra"])
    text = combine_tables({"tri": write_eval_dir(tmp_path / "tri", rows)})
    tatoeba = md_table(text, "## Table 4")
    assert list(tatoeba.columns) == ["language", "model", "xx→en", "en→xx", "mean"]
    assert tatoeba["language"].tolist() == ["es (spa)", "fr (fra)"]
    assert set(tatoeba["model"]) == {"tri"} and "(" not in tatoeba["mean"].iloc[0]
    assert "Table 3" not in text  # no STS17 rows
