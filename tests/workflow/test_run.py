"""Real runs of the workflow on a slice of the data mirror: every rule executes, end to end."""

from __future__ import annotations

import gzip
import json

import h5py
import pytest
import yaml

import psp

from .conftest import REPO, run_snakemake, shrink_models


def tiny_config(mirror) -> dict:
    """The default config, shrunk so the whole DAG runs in a minute or two on 2 cores."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["mirror"] = str(mirror)
    # One paraphrase and one bitext model: every rule runs; the other pairs repeat the bitext one.
    config["models"] = {name: config["models"][name] for name in ("en", "es-en")}
    for section in ("mining", "bucc"):
        config[section] = {"es-en": config[section]["es-en"]}
    shrink_models(config["models"])
    config["evaluation"] = {
        "sts": True,
        "sts17": ["es-es", "es-en", "en-en"],
        "tatoeba": ["es"],
        "peers": [],
    }
    config["bucc"]["es-en"]["max_distractors"] = 150
    config["speed"] = {"sentences": 2000}
    # es-en trained a second time with the pair-weighting loss, compared in the report
    config["compare_losses"] = {"models": ["es-en"], "train": {"loss": "pair_weighting"}}
    return config


def config_options(path) -> list[str]:
    """Options that make the config file at ``path`` the whole config: it names its models, so
    the Snakefile does not load config.yaml under it (whose other models, mining and BUCC pairs
    ``all`` would otherwise train, evaluate and mine; test_only_the_configured_models_ran)."""
    return ["--configfile", str(path)]


#: The English model exported to both libraries, evaluated and timed as peers (the default
#: config's distilled MiniLM peer costs minutes, too long here).
EXPORTED_PEERS = {
    "st-psp-en": "st:results/export/sentence-transformers/psp-en",
    "m2v-psp-en": "m2v:results/export/model2vec/psp-en",
}


@pytest.fixture(scope="module")
def finished_run(mirror_slice, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("run")
    cfg = workdir / "config.yaml"
    config = tiny_config(mirror_slice)
    config["evaluation"]["peers"] = list(EXPORTED_PEERS.values())
    cfg.write_text(yaml.safe_dump(config))
    run_snakemake(["all", "--cores", "2", *config_options(cfg)], workdir)
    return workdir


def test_only_the_configured_models_ran(finished_run):
    """The tiny config replaces config.yaml: none of config.yaml's other pairs ran."""
    assert sorted(path.name for path in (finished_run / "results/models").iterdir()) == [
        "en",
        "es-en",
        "untrained",
    ]
    assert sorted(path.name for path in (finished_run / "results/mine").iterdir()) == [
        "es-en",
        "work",
    ]
    assert [path.name for path in (finished_run / "results/bucc").iterdir()] == ["es-en"]


def test_data_stage_outputs_agree(finished_run):
    for model in ("en", "es-en"):
        stats = json.loads((finished_run / f"results/data/{model}/filter_stats.json").read_text())
        assert stats["kept"] + sum(stats["removed"].values()) == stats["lines_in"] > 0
        with gzip.open(finished_run / f"results/data/{model}/pairs.tsv.gz", "rt") as handle:
            lines = handle.read().splitlines()
        assert len(lines) == stats["kept"]
        assert all(line.count("\t") == 1 and line == line.lower() for line in lines)
        with h5py.File(finished_run / f"results/hdf5/{model}.h5") as h5:
            assert h5.attrs["n_pairs"] == stats["kept"]
            assert h5["src/offsets"].shape == (stats["kept"] + 1,)


def test_models_load_and_embed(finished_run):
    model = psp.load(finished_run / "results/models/es-en")
    emb = model.embed(["Hola mundo.", "Hello world."])
    assert emb.shape == (2, 48) and emb.dtype.name == "float32"
    log = (finished_run / "results/train/es-en/train_log.tsv").read_text()
    assert log.startswith("event\tstep")
    # es-en has a BUCC-style task: selected on its dev gold's retrieval, STS-B dev beside it
    header = log.splitlines()[0].split("\t")
    assert {"bitext_dev_spa_error", "stsb_dev_spearman"} <= set(header)
    config = json.loads((finished_run / "results/models/es-en/config.json").read_text())
    assert "bitext_dev_avg_error" in json.dumps(config)
    assert (finished_run / "results/train/es-en/learning_curve.png").stat().st_size > 0


def test_evaluation_tables(finished_run):
    for prefix in ("results/eval/es-en", "results/eval/untrained/es-en", "results/eval/en"):
        tables = (finished_run / prefix / "tables.md").read_text()
        assert "STS12" in tables
        metrics = json.loads((finished_run / prefix / "metrics.json").read_text())["metrics"]
        assert any(key.startswith("tatoeba") for key in metrics) == ("es-en" in prefix)


def test_model_cards_carry_their_figures(finished_run):
    from psp.evaluate.results import tidy_eval_dir
    from psp.export.model_card import split_card

    for model in ("en", "es-en", "untrained/es-en"):
        card = finished_run / "results/models" / model / "README.md"
        metadata, body = split_card(card.read_text(encoding="utf-8"), str(card))
        scores = tidy_eval_dir(finished_run / "results/eval" / model, model=model)
        stsb = scores.query("benchmark == 'STSB' and task == 'test' and metric == 'pearson'")
        (result,) = [
            r for r in metadata["model-index"][0]["results"] if r["dataset"]["type"] == "STSB/test"
        ]
        assert result["metrics"][0]["value"] == round(float(stsb["value"].iloc[0]), 2)
        assert metadata["datasets"] and metadata["license"]
        assert body.startswith("# " + model.split("/")[-1])


def test_exported_peers_score_as_the_model(finished_run):
    """The English model, exported and loaded by each library, is a peer on the same harness:
    its STS rows are the model's (cosines >= 0.9999 give the same correlations), and Table 5
    times it beside our models."""
    from psp.evaluate.results import tidy_eval_dir

    own = tidy_eval_dir(finished_run / "results/eval/en", model="en").query("benchmark != 'STS17'")
    for label in EXPORTED_PEERS:
        peer = tidy_eval_dir(finished_run / "results/eval/peers" / label, model=label)
        merged = own.merge(peer, on=["benchmark", "task", "metric"], suffixes=("", "_peer"))
        assert len(merged) == len(own) > 0
        assert (merged["value"] - merged["value_peer"]).abs().max() < 0.05
    speed = (finished_run / "results/speed/speed.csv").read_text()
    assert all(f"\n{label},peer," in speed for label in EXPORTED_PEERS)


def test_mining_outputs(finished_run):
    mined = finished_run / "results/mine/es-en/es-en.tsv.gz"
    with gzip.open(mined, "rt") as handle:
        scores = [float(line.split("\t")[0]) for line in handle]
    stats = json.loads(mined.with_name("es-en.stats.json").read_text())
    assert scores == sorted(scores, reverse=True)
    assert len(scores) == stats["kept"]
    # threshold: auto (the default) mines at the dev optimum of the pair's BUCC-style task
    bucc = json.loads((finished_run / "results/bucc/es-en/bucc.json").read_text())
    assert stats["threshold"] == bucc["dev"]["threshold"]
    assert stats["threshold_source"] == {
        "from": "bucc_dev",
        "file": "results/bucc/es-en/bucc.json",
        "dev_f1": bucc["dev"]["f1"],
    }
    assert min(scores, default=stats["threshold"]) >= stats["threshold"] - 5e-5  # 4 decimals
    assert all(score >= stats["threshold"] for score in scores)
    assert not list((finished_run / "results/mine/work/es-en/emb").glob("*.npy")), "temp shards"
    bucc = json.loads((finished_run / "results/bucc/es-en/bucc.json").read_text())
    assert 0.0 <= bucc["test"]["f1"] <= 1.0


def test_report_gathers_everything(finished_run):
    report = (finished_run / "results/report.md").read_text()
    for heading in ("## Evaluation", "## Training", "## Mining", "## Mining quality"):
        assert heading in report
    assert "untrained es-en (floor)" in report
    page = (finished_run / "results/results.md").read_text()
    assert page.startswith("# Results\n") and "## Table 2" in page and "![" not in page
    speed = finished_run / "results/speed"
    assert "![speed against quality](speed/speed_quality.png)" in report
    assert (speed / "speed_quality.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_second_objective_trained_evaluated_and_compared(finished_run):
    second = finished_run / "results/compare_losses"
    provenance = json.loads((second / "models/es-en/config.json").read_text())["provenance"]
    first = json.loads((finished_run / "results/models/es-en/config.json").read_text())
    assert provenance["train_config"]["loss"] == "pair_weighting"
    assert first["provenance"]["train_config"]["loss"] == "margin"
    assert provenance["h5"] == first["provenance"]["h5"]  # the same pairs
    assert provenance["epochs"] == first["provenance"]["epochs"] == 2
    assert 0.0 <= json.loads((second / "bucc/es-en/bucc.json").read_text())["test"]["f1"] <= 1
    report = (finished_run / "results/report.md").read_text()
    section = report.split("## Training objectives compared", 1)[1].split("\n## ", 1)[0]
    assert "| es-en   | margin " in section and "| es-en   | pair_weighting " in section


def test_mismatched_bitext_fails_cleanly(mirror_slice, tmp_path):
    """Sides of different lengths: an error naming both files, and no output left behind."""
    mirror = tmp_path / "mirror"
    (mirror / "bitext/es-en").mkdir(parents=True)
    corpora = yaml.safe_load((REPO / "config.yaml").read_text())["models"]["es-en"]["corpora"]
    for corpus in (ref.rsplit("/", 1)[1] for ref in corpora):
        for lang in ("es", "en"):
            name = f"bitext/es-en/{corpus}.{lang}.gz"
            lines = gzip.open(mirror_slice / name, "rt").read().splitlines()
            if corpus == "un-v1.0-dev-test" and lang == "en":
                lines = lines[:-3]
            with gzip.open(mirror / name, "wt") as handle:
                handle.write("\n".join(lines) + "\n")
    proc = run_snakemake(
        ["prepare_es_en", "--cores", "1", "--config", f"mirror={mirror}"], tmp_path, check=False
    )
    assert proc.returncode != 0
    log = (tmp_path / "results/logs/filter_pairs/es-en.log").read_text()
    assert "un-v1.0-dev-test.es.gz" in log and "un-v1.0-dev-test.en.gz" in log
    assert not (tmp_path / "results/data/es-en/pairs.tsv.gz").exists()
    assert not list((tmp_path / "results/data/es-en").glob(".*tmp"))


def test_html_report_renders(finished_run):
    run_snakemake(
        ["--report", "results/report.html", *config_options(finished_run / "config.yaml")],
        finished_run,
    )
    html = (finished_run / "results/report.html").read_text()
    assert "learning_curve.png" in html and "pr_curve.png" in html
