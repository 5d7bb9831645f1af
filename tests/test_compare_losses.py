"""The report's comparison of training objectives on hand-written trainings: each summary
cell comes from the right training's evaluation, BUCC result and log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from psp.evaluate.markdown import MISSING, fmt
from psp.io import InputError
from psp.report import ReportInputs, write_report
from psp.report.compare_losses import comparison_section, trainings
from tests.test_tables import eval_rows, md_table, write_eval_dir

TRACKS = {"es-en": ["es-es", "es-en", "en-en"], "ar-en": ["ar-ar", "ar-en", "en-en"]}
CODES = {"es-en": ["spa"], "ar-en": ["ara"]}


def with_averages(rows: dict) -> dict:
    """Evaluator rows plus the ``avg`` rows the STS17 and Tatoeba evaluators write."""
    sts17, tatoeba = rows["sts17"], rows["tatoeba"]
    rows["sts17"] = [*sts17, {"track": "avg", "pearson": 50.0 + len(sts17), "spearman": 1.0}]
    errors = {"xx2en_error": 1.0, "en2xx_error": 2.0, "mean_error": 3.0 + len(tatoeba)}
    rows["tatoeba"] = [*tatoeba, {"language": "avg", "code": "avg", **errors}]
    return rows


def write_training(root: Path, model: str, base: float, dev: list[float], rate: list[float]):
    """An evaluation, a BUCC result and a training log of one training under ``root``."""
    rows = with_averages(eval_rows(base, TRACKS[model], CODES[model]))
    write_eval_dir(root / "eval" / model, rows)
    bucc = root / "bucc" / model / "bucc.json"
    bucc.parent.mkdir(parents=True)
    bucc.write_text(json.dumps({"dev": {"f1": 0.5}, "test": {"f1": base / 100}}))
    log = root / "train" / model / "train_log.tsv"
    log.parent.mkdir(parents=True)
    lines = ["event\tstep\tepoch\tloss\tpairs_per_s\tstsb_dev_spearman", "step\t5\t0\t0.3\t99\t"]
    lines += [
        f"epoch\t{10 * (e + 1)}\t{e}\t0.2\t{r}\t{d}" for e, (d, r) in enumerate(zip(dev, rate))
    ]
    log.write_text("\n".join(lines) + "\n")
    return rows, {"metrics": root / "eval" / model / "metrics.json", "log": log, "bucc": bucc}


@pytest.fixture
def compared(tmp_path) -> dict:
    """es-en with both objectives and BUCC results; ar-en's second training without."""
    runs = {
        ("es-en", "margin"): write_training(
            tmp_path / "a", "es-en", 40.0, [0.5, 0.7, 0.6], [900, 1000, 1200]
        ),
        ("es-en", "pair_weighting"): write_training(
            tmp_path / "b", "es-en", 60.0, [0.6, 0.65, 0.8], [2000, 2100, 1900]
        ),
        ("ar-en", "margin"): write_training(tmp_path / "a", "ar-en", 20.0, [0.1], [500]),
    }
    entries, files = [], {"metrics": [], "log": [], "bucc": []}
    for (model, objective), (_, paths) in runs.items():
        with_bucc = model == "es-en"
        entries.append({"model": model, "objective": objective, "n_bucc": int(with_bucc)})
        files["metrics"].append(paths["metrics"])
        files["log"].append(paths["log"])
        files["bucc"] += [paths["bucc"]] if with_bucc else []
    return {
        "runs": runs,
        "trainings": trainings(entries, files["metrics"], files["log"], files["bucc"]),
    }


def test_summary_cells_come_from_each_training(compared):
    text = "\n".join(comparison_section(compared["trainings"]))
    table = md_table(text, "## Training objectives compared")
    table = table.set_index(table["model"] + " " + table["objective"])
    for (model, objective), (rows, _) in compared["runs"].items():
        row = table.loc[f"{model} {objective}"]
        sts = {(r["benchmark"], r["dataset"]): r["pearson"] for r in rows["sts"]}
        assert row["STS avg"] == fmt(sts[("avg", "mean")])
        assert row["STS-B test"] == fmt(sts[("STSB", "test")])
        assert row["STS17"] == fmt(rows["sts17"][-1]["pearson"])
        assert row["Tatoeba err"] == fmt(rows["tatoeba"][-1]["mean_error"])
    assert table.loc["es-en margin", "BUCC F1"] == "40.0"
    assert table.loc["es-en pair_weighting", "BUCC F1"] == "60.0"
    assert table.loc["ar-en margin", "BUCC F1"] == MISSING  # no BUCC task for it
    assert table.loc["es-en margin", "best epoch / epochs"] == "1 / 3"
    assert table.loc["es-en pair_weighting", "best epoch / epochs"] == "2 / 3"
    assert table.loc["es-en margin", "pairs/s"] == "1,000"  # median of the epoch rows


def test_detail_table_has_each_training_own_tracks(compared):
    text = "\n".join(comparison_section(compared["trainings"]))
    detail = md_table(text, "### Per STS17 track")
    detail = detail.set_index(detail["model"] + " " + detail["objective"])
    rows, _ = compared["runs"][("ar-en", "margin")]
    assert detail.loc["ar-en margin", "STS17 ar-ar"] == fmt(rows["sts17"][0]["pearson"])
    assert detail.loc["ar-en margin", "err ara"] == fmt(rows["tatoeba"][0]["mean_error"])
    assert detail.loc["es-en margin", "STS17 ar-ar"] == MISSING
    assert "STS17 avg" not in detail.columns


def test_report_has_the_section_only_with_trainings(compared, tmp_path):
    evals = [compared["trainings"][0].metrics]
    inputs = ReportInputs(evals=evals, languages={"es-en": ["es", "en"]})
    write_report(tmp_path / "report.md", inputs)
    assert "Training objectives compared" not in (tmp_path / "report.md").read_text()
    inputs.loss_comparison = compared["trainings"]
    write_report(tmp_path / "report.md", inputs)
    assert "## Training objectives compared" in (tmp_path / "report.md").read_text()


def test_paths_are_dealt_to_the_trainings_in_turn(compared):
    first, second, third = compared["trainings"]
    assert [len(t.bucc) for t in compared["trainings"]] == [1, 1, 0]
    assert first.bucc[0] != second.bucc[0] and third.train_log.parent.name == "ar-en"
    entries = [{"model": "es-en", "objective": "margin", "n_bucc": 2}]
    with pytest.raises(ValueError, match="1 BUCC results for 2 expected"):
        trainings(entries, [first.metrics], [first.train_log], first.bucc)


def test_a_bad_training_log_is_named(compared):
    broken = compared["trainings"][0]
    broken.train_log.write_text("event\tstep\nepoch\t1\n")
    with pytest.raises(InputError, match=rf"{broken.train_log}: not a training log"):
        comparison_section([broken])
