"""The paper config's world run, in small: no mirror, every source downloaded over HTTP in its
upstream layout (tests/upstream.py) from a local server standing in for the upstream hosts
(``source_url_prefix``), then ``all`` down to results/report.md, with mining scored on BUCC 2018.

The archives are rebuilt from the shared data mirror's real text, so the paper's filters,
training and evaluation see real sentences; the test skips without the mirror.
"""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest
import yaml

from psp.data.sources import SOURCES, STS17_TRACKS, STS_DATASETS, upstream_via
from psp.io import read_lines
from tests import upstream
from tests.fileserver import serve

from .conftest import REPO, run_snakemake, shrink_models

BITEXT = ("OpenSubtitles2018", "Tanzil", "Europarl", "GlobalVoices")


def _rows(path) -> list[tuple[str, ...]]:
    return [tuple(line.split("\t")) for line in read_lines(path)]


def _paper_corpora(data) -> dict[str, bytes]:
    """ParaNMT-50M from the mirror's ParaSci pairs (a score column added), and the de-en OPUS
    corpora from slices of its newstest."""
    parasci = _rows(data / "paraphrase/parasci/acl-train.tsv.gz")[:1500]
    files = {
        SOURCES["paraphrase/paranmt/para-nmt-50m"].url: upstream.paranmt_zip(
            ("0.85", a, b) for a, b in parasci
        )
    }
    de = read_lines(data / "bitext/de-en/wmt-newstest.de.gz")
    en = read_lines(data / "bitext/de-en/wmt-newstest.en.gz")
    for n, name in enumerate(BITEXT):
        source = SOURCES[f"bitext/de-en/{name}"]
        corpus = source.url.split("/OPUS-", 1)[1].split("/", 1)[0]
        part = slice(500 * n, 500 * (n + 1))
        files[source.url] = upstream.opus_moses_zip(corpus, ("de", "en"), (de[part], en[part]))
    return files


def _eval_sets(data) -> dict[str, bytes]:
    """STS 2012-2016, STS-B, STS17 and Tatoeba, each rebuilt from the mirror's copy (Tatoeba's
    files are LASER's own bytes, so they pass the registry's pins)."""
    files = {}
    for year, datasets in STS_DATASETS.items():
        url = next(u for u in SOURCES["sts/en"].urls if f"STS{year}-" in u)
        rows = {d: _rows(data / f"sts/en/STS{year}/{d}.tsv") for d in datasets}
        files[url] = upstream.senteval_sts_zip(year, rows)
    splits = {}
    for split in ("train", "dev", "test"):
        scored, meta = (
            _rows(data / f"sts/stsb/{split}.tsv"),
            _rows(data / f"sts/stsb/{split}.meta.tsv"),
        )
        splits[split] = [
            (*m, upstream.padded(s), a, b) for m, (s, a, b) in zip(meta, scored, strict=True)
        ]
    files[SOURCES["sts/stsb"].url] = upstream.stsb_tar(splits)
    tracks = {t: _rows(data / f"sts/sts17/{pair}.tsv") for t, pair in STS17_TRACKS.items()}
    files.update(zip(SOURCES["sts/sts17"].urls, upstream.semeval2017_zips(tracks), strict=True))
    for url in SOURCES["tatoeba"].urls:
        files[url] = (data / "tatoeba" / url.rsplit("/", 1)[-1]).read_bytes()
    return files


def _bucc(data) -> dict[str, bytes]:
    """BUCC 2018 de-en: NTREX-128 pairs hidden among newstest sentences, 100 gold in sample and
    200 in training, every sentence in one split only."""
    gold = list(
        zip(
            read_lines(data / "bitext/de-en/ntrex128.de.gz"),
            read_lines(data / "bitext/de-en/ntrex128.en.gz"),
            strict=True,
        )
    )
    de = read_lines(data / "bitext/de-en/wmt-newstest.de.gz")[3000:]
    en = read_lines(data / "mono/en/wmt-newstest-en.txt.gz")
    sample, training = SOURCES["bucc2018/de-en"].urls
    return {
        sample: upstream.bucc2018_split("de", "sample", gold[:100], (de[:300], en[:300]), seed=1),
        training: upstream.bucc2018_split(
            "de", "training", gold[100:300], (de[300:900], en[300:900]), seed=2
        ),
    }


def world_config(prefix: str, bucc: dict[str, bytes]) -> dict:
    """configs/paper.yaml, shrunk: the English and German models with the paper's corpora and
    filters, tiny training; de-en mined and scored on BUCC 2018; everything downloaded from
    ``prefix``. The BUCC fixtures replace the registry's pins of the real archives."""
    config = yaml.safe_load((REPO / "configs/paper.yaml").read_text())
    assert config["mirror"] is None
    config["models"] = {name: config["models"][name] for name in ("en", "de-en")}
    shrink_models(config["models"])
    config["mining"] = {"de-en": {**config["mining"]["de-en"], "shards": 1}}
    config["bucc"] = {"de-en": config["bucc"]["de-en"]}
    config["speed"] = {"sentences": 500, "news": ["bitext/de-en/GlobalVoices.en"]}
    config["source_url_prefix"] = prefix
    config["source_sha256"] = {url: hashlib.sha256(d).hexdigest() for url, d in bucc.items()}
    return config


@pytest.fixture(scope="module")
def world_run(shared_data, tmp_path_factory):
    server_iter = serve()
    server = next(server_iter)
    bucc = _bucc(shared_data)
    files = {**_paper_corpora(shared_data), **_eval_sets(shared_data), **bucc}
    for url, data in files.items():
        server.state.files[upstream.site_path(url)] = data
    workdir = tmp_path_factory.mktemp("world")
    cfg = workdir / "world.yaml"
    cfg.write_text(yaml.safe_dump(world_config(server.base, bucc)))
    try:
        run_snakemake(
            ["all", "--cores", "2", "--configfile", str(cfg), "--replace-workflow-config"], workdir
        )
    finally:
        next(server_iter, None)
    return workdir, server, files


def test_every_download_came_from_the_prefix_in_its_upstream_layout(world_run):
    workdir, server, files = world_run
    requested = {path for path, _, status in server.state.requests if status == 200}
    assert requested == {upstream.site_path(url) for url in files}
    manifests = sorted((workdir / "results/sources/.manifests").rglob("*.json"))
    fetched = {d["url"]: d for m in manifests for d in json.loads(m.read_text())["downloads"]}
    assert set(fetched) == set(files)
    assert all(d["fetched_from"] == upstream_via(u, server.base) for u, d in fetched.items())
    pinned = {u for u, d in fetched.items() if d["pinned"]}
    assert pinned == set(SOURCES["tatoeba"].urls) | set(SOURCES["bucc2018/de-en"].urls)
    lock = json.loads((workdir / "results/downloads/downloads.lock.json").read_text())
    assert set(lock) == set(files) - pinned  # the unpinned are held to their first download


def test_bucc2018_threshold_from_sample_scored_on_training(world_run):
    workdir, _, _ = world_run
    bucc = json.loads((workdir / "results/bucc/de-en/bucc.json").read_text())
    assert bucc["dev"]["gold"] == 100 and bucc["test"]["gold"] == 200
    assert bucc["dev"]["n_src"] == 400 and bucc["test"]["n_src"] == 800
    assert bucc["dev"]["threshold"] == bucc["test"]["threshold"]
    with gzip.open(workdir / "results/mine/de-en/de-en.tsv.gz", "rt") as handle:
        mined = [line.split("\t") for line in handle]
    stats = json.loads((workdir / "results/mine/de-en/de-en.stats.json").read_text())
    assert len(mined) == stats["kept"] and stats["n_src"] <= 800


def test_the_report_has_every_section(world_run):
    workdir, _, _ = world_run
    report = (workdir / "results/report.md").read_text()
    for heading in ("## Evaluation", "## Training", "## Mining", "## Mining quality"):
        assert heading in report
    assert "de-en" in report.split("## Mining quality", 1)[1]
    for model in ("en", "de-en"):
        assert (workdir / f"results/models/{model}/README.md").exists()
