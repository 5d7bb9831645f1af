"""Every source the paper config downloads, built in its upstream layout (see tests/upstream.py
for the public source each layout follows), served over HTTP at its upstream host and path and
imported through :func:`psp.data.sources.fetch_and_import` with ``url_prefix``, as the workflow's
``source_url_prefix`` does."""

from __future__ import annotations

import argparse
import gzip
import hashlib
import re
import threading
from pathlib import Path

import pytest

from psp.data.sources import (
    BUCC_LANGUAGES,
    SOURCES,
    STS_DATASETS,
    DownloadError,
    fetch,
    fetch_and_import,
    import_bucc2018,
    import_xnli,
    upstream_via,
    with_pins,
)
from psp.data.sources.verify import holding
from psp.io import InputError

from . import upstream
from .fileserver import serve


@pytest.fixture
def server():
    yield from serve()


def _publish(server, files: dict[str, bytes]) -> None:
    """Serve ``files`` (upstream URL -> bytes) at their upstream host and path."""
    for url, data in files.items():
        server.state.files[upstream.site_path(url)] = data


def _import(server, tmp_path: Path, source_id: str, files: dict[str, bytes], repin: bool = False):
    """Publish ``files`` and run the whole download and import of ``source_id`` against them.

    ``repin``: the registry pins the real files' sha256, which a fixture cannot match; the
    fixture's own sha256 replaces the pins (the workflow's ``source_sha256``).
    """
    _publish(server, files)
    source = SOURCES[source_id]
    assert set(files) == set(source.urls)
    if repin:
        source = with_pins(source, {u: hashlib.sha256(d).hexdigest() for u, d in files.items()})
    record = fetch_and_import(
        source,
        tmp_path / "dl",
        tmp_path / "data",
        manifest=tmp_path / "m.json",
        url_prefix=server.base,
    )
    assert [d["fetched_from"] for d in record["downloads"]] == [
        upstream_via(url, server.base) for url in source.urls
    ]
    assert all((tmp_path / "data" / out).exists() for out in source.outputs)
    return record


def _gz(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines()


def test_url_prefix_keeps_host_path_and_query():
    url = SOURCES["paraphrase/paranmt/para-nmt-50m"].url
    assert upstream_via(url, "http://mirror:8000/up/") == (
        "http://mirror:8000/up/drive.usercontent.google.com/download"
        "?id=1rbF3daJjCsa1-fu2GANeJd2FBXos1ugD&export=download&confirm=t"
    )
    assert upstream_via(url, None) == url


def test_registry_uses_https_and_pins_what_is_published():
    for source in SOURCES.values():
        for url in source.urls:
            assert url.startswith("https://"), url
    for xx in BUCC_LANGUAGES:
        source = SOURCES[f"bucc2018/{xx}-en"]
        assert all(re.fullmatch(r"[0-9a-f]{64}", source.sha256_of(u) or "") for u in source.urls)
    tatoeba = SOURCES["tatoeba"]
    assert all(tatoeba.sha256_of(url) for url in tatoeba.urls)


def test_paranmt(server, tmp_path):
    """Layout: jwieting/paraphrastic-representations-at-scale preprocess/paranmt/do_all.sh (the
    paper's phontron.com URL answers 404)."""
    rows = [("0.91", "a man walks .", "a person is walking ."), ("0.42", "hi there", "hello")]
    source = SOURCES["paraphrase/paranmt/para-nmt-50m"]
    _import(server, tmp_path, source.id, {source.url: upstream.paranmt_zip(rows)})
    assert (tmp_path / "dl" / source.id / "para-nmt-50m.zip").exists()
    out = tmp_path / "data/paraphrase/paranmt/para-nmt-50m.tsv.gz"
    assert _gz(out) == [f"{a}\t{b}\t{s}" for s, a, b in rows]


@pytest.mark.parametrize(
    "source_id", sorted(s.id for s in SOURCES.values() if s.format == "opus-moses-zip")
)
def test_opus_moses_zip(server, tmp_path, source_id):
    """Layout: the moses zips of opus.nlpl.eu ({corpus}.{l1}-{l2}.{l1,l2}, README, LICENSE)."""
    source = SOURCES[source_id]
    xx = source.languages[0]
    corpus = source.url.split("/OPUS-", 1)[1].split("/", 1)[0]
    codes = [source.options["codes"][lang] for lang in source.languages]
    sides = [[f"{xx} sentence {i} ü" for i in range(5)], [f"english {i}" for i in range(5)]]
    _import(
        server, tmp_path, source_id, {source.url: upstream.opus_moses_zip(corpus, codes, sides)}
    )
    assert _gz(tmp_path / "data" / f"{source_id}.{xx}.gz") == sides[0]
    assert _gz(tmp_path / "data" / f"{source_id}.en.gz") == sides[1]


def test_sts_2012_to_2016(server, tmp_path):
    """Layout: SentEval data/downstream/get_transfer_data.bash (STS_subdirs, STS2016.* names)."""
    files = {}
    for year, datasets in STS_DATASETS.items():
        url = next(u for u in SOURCES["sts/en"].urls if f"STS{year}-" in u)
        rows = {d: [("4", f"{d} one .", f"{d} uno ."), ("0.5", "two", "dos")] for d in datasets}
        files[url] = upstream.senteval_sts_zip(year, rows)
    _import(server, tmp_path, "sts/en", files)
    assert (tmp_path / "data/sts/en/STS2016/headlines.tsv").read_text() == (
        "4\theadlines one .\theadlines uno .\n0.5\ttwo\tdos\n"
    )
    assert not (tmp_path / "data/sts/en/STS2013/SMT.tsv").exists()


def test_stsb(server, tmp_path):
    """Layout: the STS wiki's Stsbenchmark.tar.gz (stsbenchmark/sts-{split}.csv)."""
    row = ("main-news", "headlines", "2013", "0042", "3.800", "A  man speaks", "A man talks", "src")
    source = SOURCES["sts/stsb"]
    splits = {split: [row] for split in ("train", "dev", "test")}
    _import(server, tmp_path, source.id, {source.url: upstream.stsb_tar(splits)})
    assert (tmp_path / "data/sts/stsb/dev.tsv").read_text() == "3.8\tA man speaks\tA man talks\n"
    assert (tmp_path / "data/sts/stsb/dev.meta.tsv").read_text() == (
        "main-news\theadlines\t2013\t0042\n"
    )


def test_sts17(server, tmp_path):
    """Layout: SemEval-2017 Task 1's sts2017.eval.v1.1.zip and sts2017.gs.zip."""
    tracks = {t: [("4.2", f"{t} one", "bir"), ("1", "two", "iki")] for t in upstream.STS17_FILES}
    source = SOURCES["sts/sts17"]
    eval_zip, gs_zip = upstream.semeval2017_zips(tracks)
    _import(server, tmp_path, source.id, dict(zip(source.urls, (eval_zip, gs_zip), strict=True)))
    assert (
        tmp_path / "data/sts/sts17/tr-en.tsv"
    ).read_text() == "4.2\ttrack6 one\tbir\n1\ttwo\tiki\n"
    assert (tmp_path / "data/sts/sts17/es-en-WMT.tsv").read_text().startswith("4.2\ttrack4b one")


def test_tatoeba_pins_refuse_other_bytes(server, tmp_path):
    """Layout: LASER data/tatoeba/v1 (tatoeba.{xxx}-eng.{xxx,eng}, line-aligned UTF-8). The
    registry pins every file, so a server with other bytes is refused before any import."""
    source = SOURCES["tatoeba"]
    files = {}
    for url in source.urls:
        lang = url.rsplit(".", 1)[1]
        files[url] = upstream.lines(f"{lang} sentence one", f"{lang} sentence two")
    _publish(server, files)
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        fetch_and_import(
            source,
            tmp_path / "dl0",
            tmp_path / "d0",
            manifest=tmp_path / "m0.json",
            url_prefix=server.base,
        )
    _import(server, tmp_path, source.id, files, repin=True)
    assert (tmp_path / "data/tatoeba/tatoeba.deu-eng.deu").read_text() == (
        "deu sentence one\ndeu sentence two\n"
    )


def test_tatoeba_pins_match_the_mirror(shared_data):
    """The pins are the real files' sha256: the mirror's copies of LASER's files hash to them."""
    source = SOURCES["tatoeba"]
    for url in source.urls:
        path = shared_data / "tatoeba" / url.rsplit("/", 1)[-1]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == source.sha256_of(url), path.name


def _bucc_files(xx: str) -> dict[str, bytes]:
    files = {}
    for n, (url, split) in enumerate(
        zip(SOURCES[f"bucc2018/{xx}-en"].urls, ("sample", "training"))
    ):
        src = upstream.bucc_ids(xx, [f"{xx} satz {n} {i}" for i in range(4)])
        en = upstream.bucc_ids("en", [f"english {n} {i}" for i in range(5)], start=7)
        gold = [(src[1][0], en[3][0]), (src[2][0], en[0][0])]
        files[url] = upstream.bucc2018_tar(xx, split, {xx: src, "en": en}, gold)
    return files


@pytest.mark.parametrize("xx", BUCC_LANGUAGES)
def test_bucc2018(server, tmp_path, xx):
    """Layout: LASER tasks/bucc/bucc.sh and XTREME scripts/download_data.sh
    (bucc2018/{xx}-en/{xx}-en.{split}.{xx,en,gold}, tar.bz2)."""
    files = _bucc_files(xx)
    _publish(server, files)
    with pytest.raises(DownloadError, match="sha256 mismatch"):  # the published pins hold
        fetch_and_import(
            SOURCES[f"bucc2018/{xx}-en"],
            tmp_path / "dl0",
            tmp_path / "d0",
            manifest=tmp_path / "m0.json",
            url_prefix=server.base,
        )
    record = _import(server, tmp_path, f"bucc2018/{xx}-en", files, repin=True)
    assert all(d["pinned"] for d in record["downloads"])
    folder = tmp_path / f"data/bucc2018/{xx}-en"
    assert (folder / f"{xx}-en.training.gold").read_text() == (
        f"{xx}-000000002\ten-000000010\n{xx}-000000003\ten-000000007\n"
    )
    assert (
        (folder / f"{xx}-en.sample.{xx}").read_text().startswith(f"{xx}-000000001\t{xx} satz 0 0\n")
    )
    assert _gz(folder / f"{xx}-en.sample.en.txt.gz")[:2] == ["english 0 0", "english 0 1"]


def test_bucc2018_errors_name_member_and_line(tmp_path):
    src = upstream.bucc_ids("de", ["eins", "zwei"])
    en = upstream.bucc_ids("en", ["one", "two"])
    bad_gold = upstream.bucc2018_tar(
        "de", "sample", {"de": src, "en": en}, [("de-000000009", "en-000000001")]
    )
    archive = tmp_path / "bucc2018-de-en.sample-gold.tar.bz2"
    archive.write_bytes(bad_gold)
    with pytest.raises(InputError, match=r"de-en\.sample\.gold:1: gold id de-000000009"):
        import_bucc2018([archive], tmp_path / "out", "de")
    twice = upstream.bucc2018_tar("de", "sample", {"de": src + src[:1], "en": en}, [])
    archive.write_bytes(twice)
    with pytest.raises(InputError, match=r"de-en\.sample\.de:3: id de-000000001 occurs twice"):
        import_bucc2018([archive], tmp_path / "out", "de")
    archive.write_bytes(twice[: len(twice) // 2])
    with pytest.raises(InputError, match="bucc2018-de-en.sample-gold.tar.bz2"):
        import_bucc2018([archive], tmp_path / "out", "de")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.gold"))


def test_cli_downloads_from_a_url_prefix(server, tmp_path):
    """``psp data download --url-prefix``: the command a user points at their own HTTP mirror."""
    from psp.cli import data as data_cli

    parser = argparse.ArgumentParser(prog="psp")
    data_cli.register(parser.add_subparsers(dest="command", required=True))
    source = SOURCES["sts/stsb"]
    row = ("main-news", "headlines", "2013", "0042", "3.800", "A man speaks", "A man talks")
    _publish(server, {source.url: upstream.stsb_tar({s: [row] for s in ("train", "dev", "test")})})
    argv = ["data", "download", "sts/stsb", "--out", str(tmp_path / "data")]
    argv += ["--downloads", str(tmp_path / "dl"), "--url-prefix", server.base]
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    assert (tmp_path / "data/sts/stsb/test.tsv").read_text() == "3.8\tA man speaks\tA man talks\n"
    assert [path for path, _, _ in server.state.requests] == [upstream.site_path(source.url)]


# Three languages, rows grouped by language as in the real files. Premise 1 comes with two
# hypotheses (its repeat is dropped), the test split repeats a dev pair (dropped, dev first),
# a premise starts with a quote (text under QUOTE_NONE) and one has a double space (collapsed).
_XNLI = {
    "dev": [
        ("de", "Er kam heim.", "Er war müde.", "1a"),
        ("de", "Er kam heim.", "Er blieb weg.", "1b"),
        ("de", '"Halt", sagte sie.', "Sie  schwieg.", "2a"),
        ("en", "He came home.", "He was tired.", "1a"),
        ("en", "He came home.", "He stayed away.", "1b"),
        ("en", '"Stop," she said.', "She was silent.", "2a"),
        ("zh", "他回家了。", "他累了。", "1a"),
        ("zh", "他回家了。", "他没回来。", "1b"),
        ("zh", "“停下，”她说。", "她沉默了。", "2a"),
    ],
    "test": [
        ("en", "He came home.", "He slept.", "3a"),
        ("de", "Er kam heim.", "Er schlief.", "3a"),
        ("zh", "他回家了。", "他睡了。", "3a"),
    ],
}


def test_xnli_pairs_share_one_download(server, tmp_path):
    """Layout: XNLI-1.0.zip as Hugging Face's xnli loader reads it (XNLI-1.0/xnli.{dev,test}.tsv,
    16 tab-separated columns, rows of a pair sharing pairID). Two pairs import from one download."""
    files = {SOURCES["bitext/de-en/xnli"].url: upstream.xnli_zip(_XNLI)}
    _import(server, tmp_path, "bitext/de-en/xnli", files)
    _import(server, tmp_path, "bitext/zh-en/xnli", files)
    assert [path for path, _, _ in server.state.requests] == [upstream.site_path(list(files)[0])]
    data = tmp_path / "data/bitext"
    english = ["He came home.", "He was tired.", "He stayed away.", '"Stop," she said.']
    english += ["She was silent.", "He slept."]
    assert _gz(data / "de-en/xnli.en.gz") == english
    assert _gz(data / "de-en/xnli.de.gz") == [
        "Er kam heim.",
        "Er war müde.",
        "Er blieb weg.",
        '"Halt", sagte sie.',
        "Sie schwieg.",
        "Er schlief.",
    ]
    assert _gz(data / "zh-en/xnli.en.gz") == english
    assert _gz(data / "zh-en/xnli.zh.gz")[3:5] == ["“停下，”她说。", "她沉默了。"]


def test_fetches_sharing_a_download_folder_take_turns(server, tmp_path):
    """While one fetch holds the shared folder, another waits instead of downloading too."""
    source = SOURCES["bitext/de-en/xnli"]
    _publish(server, {source.url: upstream.xnli_zip(_XNLI)})
    kwargs = {"url_prefix": server.base, "progress": False}
    with holding(tmp_path / "dl" / source.download_folder):
        other = threading.Thread(target=fetch, args=(source, tmp_path / "dl"), kwargs=kwargs)
        other.start()
        other.join(0.5)
        assert other.is_alive() and not server.state.requests
    other.join(30)
    assert not other.is_alive() and len(server.state.requests) == 1


def test_xnli_errors_name_member_and_line(tmp_path):
    archive = tmp_path / "XNLI-1.0.zip"
    orphan = {"dev": [("de", "Er kam.", "Er ging.", "9a")], "test": _XNLI["test"]}
    archive.write_bytes(upstream.xnli_zip(orphan))
    with pytest.raises(InputError, match=r"xnli\.dev\.tsv:2: pairID 9a has no English row"):
        import_xnli(archive, tmp_path / "out", "bitext/de-en/xnli", "de")
    archive.write_bytes(
        upstream.xnli_zip({"dev": _XNLI["dev"], "test": [("de", "a\tb", "c", "3a")]})
    )
    with pytest.raises(InputError, match=r"xnli\.test\.tsv:2: expected 16 tab-separated columns"):
        import_xnli(archive, tmp_path / "out", "bitext/de-en/xnli", "de")
    archive.write_bytes(upstream.xnli_zip({"dev": _XNLI["dev"]}))
    with pytest.raises(
        InputError, match=r"XNLI-1\.0\.zip: expected one member matching .*test.*, found none"
    ):
        import_xnli(archive, tmp_path / "out", "bitext/de-en/xnli", "de")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.gz"))


# XNLI 1.0 has 2,490 dev and 5,010 test pairs per language, three hypotheses to a premise:
# 830 + 2,490 and 1,670 + 5,010 distinct pairs in the mirror's convention.
_XNLI_SPLIT_PAIRS = {"xnli-dev": 3320, "xnli-test": 6680}


@pytest.mark.parametrize("xx", [s.languages[0] for s in SOURCES.values() if s.format == "xnli-zip"])
def test_xnli_mirror_follows_the_importer_conventions(shared_data, xx):
    """The mirror's copy is what the importer writes less its documented decontamination
    (13-14 pairs per language, SOURCES.md): aligned, no repeated pair, whitespace collapsed,
    dev before test, each split short of its full count by a few pairs only."""
    folder = shared_data / f"bitext/{xx}-en"
    xs, en, origin = (_gz(folder / f"xnli.{side}.gz") for side in (xx, "en", "origin"))
    assert len(xs) == len(en) == len(origin)
    assert len(set(zip(xs, en))) == len(xs)
    assert all(" ".join(s.split()) == s and s for s in xs + en)
    assert origin == sorted(origin)  # xnli-dev lines first
    removed = {split: n - origin.count(split) for split, n in _XNLI_SPLIT_PAIRS.items()}
    assert all(k >= 0 for k in removed.values()) and sum(removed.values()) in (13, 14), removed
