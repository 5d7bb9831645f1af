"""Download against a real local HTTP server, and every importer on archives built in upstream format."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import socket
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from psp.data import sources
from psp.data.sources import (
    SOURCES,
    DownloadError,
    SourceError,
    download,
    fetch,
    fetch_and_import,
    import_opus_moses_zip,
    import_paranmt,
    import_semeval2017,
    import_senteval_sts,
    import_source,
    import_stsb,
    import_tatoeba,
    resolve,
)
from psp.data.sources.importers import _selection_sampler
from psp.io import InputError

from .fileserver import serve


@pytest.fixture
def server():
    yield from serve()


BODY = bytes(range(256)) * 4096 + b"tail"  # 1 MiB + 4 bytes: several chunks of 64 KiB
BODY_SHA = hashlib.sha256(BODY).hexdigest()
FAST = {"chunk_size": 1 << 16, "backoff": 0.0, "progress": False, "timeout": 10}


def test_download_verifies_checksum(server, tmp_path):
    server.state.files["/data/a.zip"] = BODY
    dest = download(f"{server.base}/data/a.zip", tmp_path / "a.zip", sha256=BODY_SHA, **FAST)
    assert dest.read_bytes() == BODY
    assert not (tmp_path / "a.zip.part").exists()
    # A second call with a verified file on disk does not touch the network.
    download(f"{server.base}/data/a.zip", dest, sha256=BODY_SHA, **FAST)
    assert len(server.state.requests) == 1


def test_dropped_connection_is_resumed_with_range(server, tmp_path):
    server.state.files["/a.bin"] = BODY
    server.state.drop_after = 300_000
    dest = download(f"{server.base}/a.bin", tmp_path / "a.bin", sha256=BODY_SHA, retries=2, **FAST)
    assert dest.read_bytes() == BODY
    assert [(r, s) for _, r, s in server.state.requests] == [(None, 200), ("bytes=300000-", 206)]


def test_existing_part_file_is_continued(server, tmp_path):
    server.state.files["/a.bin"] = BODY
    (tmp_path / "a.bin.part").write_bytes(BODY[:5000])
    dest = download(f"{server.base}/a.bin", tmp_path / "a.bin", sha256=BODY_SHA, **FAST)
    assert dest.read_bytes() == BODY
    assert server.state.requests == [("/a.bin", "bytes=5000-", 206)]


def test_server_ignoring_range_restarts_the_part(server, tmp_path):
    server.state.files["/a.bin"] = BODY
    server.state.ignore_range = True
    # Wrong bytes in the part: appending to them would fail the checksum.
    (tmp_path / "a.bin.part").write_bytes(b"x" * 5000)
    dest = download(f"{server.base}/a.bin", tmp_path / "a.bin", sha256=BODY_SHA, **FAST)
    assert dest.read_bytes() == BODY
    assert server.state.requests == [("/a.bin", "bytes=5000-", 200)]


def test_part_answered_416_is_kept_when_whole_and_refetched_when_not(server, tmp_path):
    server.state.files["/a.bin"] = BODY
    (tmp_path / "a.bin.part").write_bytes(BODY)
    dest = download(f"{server.base}/a.bin", tmp_path / "a.bin", sha256=BODY_SHA, **FAST)
    assert dest.read_bytes() == BODY
    assert [s for *_, s in server.state.requests] == [416]
    # A part longer than the file cannot be a prefix of it: start over.
    (tmp_path / "b.bin.part").write_bytes(BODY + b"extra")
    dest = download(f"{server.base}/a.bin", tmp_path / "b.bin", sha256=BODY_SHA, **FAST)
    assert dest.read_bytes() == BODY
    assert [s for *_, s in server.state.requests] == [416, 416, 200]


def test_checksum_mismatch_leaves_nothing(server, tmp_path):
    server.state.files["/a.bin"] = BODY
    url = f"{server.base}/a.bin"
    with pytest.raises(DownloadError) as err:
        download(url, tmp_path / "a.bin", sha256="0" * 64, **FAST)
    message = str(err.value)
    assert url in message and "0" * 64 in message and BODY_SHA in message
    assert list(tmp_path.iterdir()) == []


def test_404_names_the_url_and_is_not_retried(server, tmp_path):
    url = f"{server.base}/missing.zip"
    with pytest.raises(DownloadError, match=re.escape(url) + ".*404"):
        download(url, tmp_path / "missing.zip", retries=3, **FAST)
    assert list(tmp_path.iterdir()) == []
    assert len(server.state.requests) == 1


def test_server_errors_are_retried_then_reported(server, tmp_path):
    server.state.files["/a.bin"] = BODY
    server.state.fail_next = 1
    assert (
        download(f"{server.base}/a.bin", tmp_path / "a.bin", retries=1, **FAST).read_bytes() == BODY
    )
    server.state.fail_next = 5
    with pytest.raises(DownloadError, match="2 attempts.*503"):
        download(f"{server.base}/a.bin", tmp_path / "b.bin", retries=1, **FAST)


def test_unreachable_host_is_retried_then_reported(tmp_path):
    with socket.socket() as sock:  # a port nobody listens on once this socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/a.bin"
    with pytest.raises(DownloadError, match=re.escape(url) + ": giving up after 2 attempts"):
        download(url, tmp_path / "a.bin", retries=1, **FAST)
    assert list(tmp_path.iterdir()) == []


def test_fetch_and_import_a_registry_source(server, tmp_path):
    """The whole path a workflow takes: registry entry -> download -> importer -> layout."""
    archive = _stsb_tar(
        tmp_path / "upstream.tar.gz",
        {"train": TRAIN_ROWS, "dev": TRAIN_ROWS[:1], "test": TRAIN_ROWS[1:]},
    )
    data = archive.read_bytes()
    server.state.files["/Stsbenchmark.tar.gz"] = data
    source = replace(
        SOURCES["sts/stsb"],
        url=f"{server.base}/Stsbenchmark.tar.gz",
        sha256=hashlib.sha256(data).hexdigest(),
    )
    paths = fetch(source, tmp_path / "downloads", **FAST)
    assert paths == [tmp_path / "downloads" / "sts" / "stsb" / "Stsbenchmark.tar.gz"]
    record = fetch_and_import(
        source, tmp_path / "downloads", tmp_path / "data", manifest=tmp_path / "m.json"
    )
    assert json.loads((tmp_path / "m.json").read_text()) == record
    assert record["downloads"][0]["sha256"] == source.sha256
    assert sorted(record["files"]) == sorted(str(tmp_path / "data" / o) for o in source.outputs)
    assert resolve("sts/stsb", data_root=tmp_path / "data") == [
        tmp_path / "data" / o for o in source.outputs
    ]
    assert all(p.exists() for p in resolve("sts/stsb", mirror=tmp_path / "data"))


# ---------------------------------------------------------------------------------------------
# Registry


def test_registry_covers_the_paper_corpora():
    os_es = SOURCES["bitext/es-en/OpenSubtitles2018"]
    assert os_es.url == "https://object.pouta.csc.fi/OPUS-OpenSubtitles/v2018/moses/en-es.txt.zip"
    assert SOURCES["bitext/ar-en/MultiUN"].url.endswith("/OPUS-MultiUN/v1/moses/ar-en.txt.zip")
    assert SOURCES["bitext/zh-en/OpenSubtitles2018"].url.endswith("/en-zh_cn.txt.zip")
    for xx in ("ar", "de", "es", "fr", "ru", "tr", "zh"):
        assert f"bitext/{xx}-en/Tanzil" in SOURCES and f"bitext/{xx}-en/GlobalVoices" in SOURCES
    assert {s.id for s in sources.select("bitext") if s.id.endswith("/Europarl")} == {
        "bitext/de-en/Europarl",
        "bitext/es-en/Europarl",
        "bitext/fr-en/Europarl",
    }
    assert len(SOURCES["tatoeba"].urls) == len(SOURCES["tatoeba"].outputs) == 224
    assert [s.id for s in sources.select("sts")] == ["sts/en", "sts/stsb", "sts/sts17"]
    assert all(
        s.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", s.sha256) for s in SOURCES.values()
    )
    with pytest.raises(SourceError, match="unknown source"):
        sources.select("bitext/xx-en/Nothing")


def test_registry_matches_the_shared_mirror(shared_data):
    """Every file the registry promises for the sets the mirror carries is in the mirror."""
    for prefix in (
        "sts",
        "tatoeba",
        "paraphrase/mrpc",
        "paraphrase/parasci",
        "mono",
        "bitext/es-en/wmt-newstest",
    ):
        assert resolve(prefix, mirror=shared_data)
    with pytest.raises(InputError, match="lacks 2 file"):
        resolve("bitext/es-en/OpenSubtitles2018", mirror=shared_data)


def test_mirror_only_sets_say_so():
    with pytest.raises(SourceError, match="mirror"):
        import_source(SOURCES["bitext/es-en/wmt-newstest"], "x", "y")
    with pytest.raises(SourceError, match="mirror"):
        fetch(SOURCES["paraphrase/parasci/acl-train"], "x")


# ---------------------------------------------------------------------------------------------
# Importers on fixtures written in the upstream formats


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _lines(*lines: str | bytes) -> bytes:
    return b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines)


def _gz_lines(path: Path) -> list[bytes]:
    return gzip.decompress(path.read_bytes()).splitlines()


def _opus_zip(path: Path, en: list[bytes], es: list[bytes]) -> Path:
    return _zip(
        path,
        {
            "OpenSubtitles.en-es.en": _lines(*en),
            "OpenSubtitles.en-es.es": _lines(*es),
            "OpenSubtitles.en-es.ids": _lines(*[b"x"] * len(en)),
            "README": b"readme\n",
            "__MACOSX/._OpenSubtitles.en-es.es": b"resource fork",
        },
    )


def test_opus_zip_import_copies_lines_byte_for_byte(tmp_path):
    en = [f"english {i}".encode() for i in range(10)] + [b"bad \xff byte", b"with\ttab"]
    es = [f"spanish {i}".encode() for i in range(10)] + [b"malo", b"con\ttab"]
    archive = _opus_zip(tmp_path / "en-es.txt.zip", en, es)
    outs = import_opus_moses_zip(
        archive, tmp_path / "out", corpus_id="bitext/es-en/OpenSubtitles2018", langs=("es", "en")
    )
    assert outs == [
        tmp_path / "out/bitext/es-en/OpenSubtitles2018.es.gz",
        tmp_path / "out/bitext/es-en/OpenSubtitles2018.en.gz",
    ]
    assert _gz_lines(outs[0]) == es and _gz_lines(outs[1]) == en


def test_opus_zip_cap_samples_aligned_pairs_in_order(tmp_path):
    en = [f"english {i}".encode() for i in range(50)]
    es = [f"spanish {i}".encode() for i in range(50)]
    archive = _opus_zip(tmp_path / "en-es.txt.zip", en, es)
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    sa, ea = import_opus_moses_zip(
        archive, out_a, corpus_id="bitext/es-en/OS", langs=("es", "en"), max_pairs=7, seed=3
    )
    idx = [int(line.split()[1]) for line in _gz_lines(sa)]
    assert len(idx) == 7 and idx == sorted(idx) and len(set(idx)) == 7
    assert _gz_lines(ea) == [f"english {i}".encode() for i in idx]
    sb, _ = import_opus_moses_zip(
        archive, out_b, corpus_id="bitext/es-en/OS", langs=("es", "en"), max_pairs=7, seed=3
    )
    assert _gz_lines(sb) == _gz_lines(sa)
    sc, _ = import_opus_moses_zip(
        archive, tmp_path / "c", corpus_id="bitext/es-en/OS", langs=("es", "en"), max_pairs=500
    )
    assert len(_gz_lines(sc)) == 50


def test_selection_sampler_is_exact_and_uniform():
    counts = [0] * 10
    for seed in range(3000):
        take = _selection_sampler(10, 3, seed)
        picks = [i for i in range(10) if take()]
        assert len(picks) == 3
        for i in picks:
            counts[i] += 1
    # Each position is picked 900 times in expectation (sd ~25).
    assert all(800 < c < 1000 for c in counts), counts


def test_opus_zip_uses_opus_language_codes(tmp_path):
    archive = _zip(
        tmp_path / "en-zh_cn.txt.zip",
        {
            "OpenSubtitles.en-zh_cn.en": _lines("hello"),
            "OpenSubtitles.en-zh_cn.zh_cn": _lines("你好"),
        },
    )
    source = SOURCES["bitext/zh-en/OpenSubtitles2018"]
    zh, en = import_source(source, archive, tmp_path / "out")
    assert _gz_lines(zh) == ["你好".encode()] and _gz_lines(en) == [b"hello"]


def test_opus_zip_with_misaligned_members_writes_nothing(tmp_path):
    archive = _opus_zip(tmp_path / "en-es.txt.zip", [b"a", b"b", b"c"], [b"x", b"y"])
    for cap in (None, 2):
        with pytest.raises(
            InputError,
            match=r"OpenSubtitles\.en-es\.es has 2 lines.*|OpenSubtitles\.en-es\.en has 3",
        ):
            import_opus_moses_zip(
                archive,
                tmp_path / "out",
                corpus_id="bitext/es-en/OS",
                langs=("es", "en"),
                max_pairs=cap,
            )
    assert not any(p.is_file() for p in (tmp_path / "out").rglob("*"))


def test_truncated_archives_are_input_errors(tmp_path):
    whole = _opus_zip(tmp_path / "whole.zip", [b"a"] * 1000, [b"b"] * 1000).read_bytes()
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InputError, match="cut.zip"):
        import_opus_moses_zip(
            cut, tmp_path / "out", corpus_id="bitext/es-en/OS", langs=("es", "en")
        )
    tar = _stsb_tar(
        tmp_path / "whole.tar.gz", {"train": TRAIN_ROWS, "dev": TRAIN_ROWS, "test": TRAIN_ROWS}
    )
    cut_tar = tmp_path / "cut.tar.gz"
    cut_tar.write_bytes(tar.read_bytes()[:-40])
    with pytest.raises(InputError, match="cut.tar.gz"):
        import_stsb(cut_tar, tmp_path / "out")
    paranmt = tmp_path / "para.tsv.gz"
    paranmt.write_bytes(gzip.compress(_lines(*["a\tb\t0.5"] * 5000))[:-30])
    with pytest.raises(InputError, match="para.tsv.gz"):
        import_paranmt(paranmt, tmp_path / "out")


def test_paranmt_import_from_zip_and_row_errors(tmp_path):
    rows = ["a man walks .\ta person walks .\t0.91", "hi there\thello\t0.5"]
    archive = _zip(
        tmp_path / "para-nmt-50m.zip",
        {"para-nmt-50m/para-nmt-50m.txt": _lines(*rows), "para-nmt-50m/README.txt": b"read me\n"},
    )
    out = import_source(SOURCES["paraphrase/paranmt/para-nmt-50m"], archive, tmp_path / "out")[0]
    assert out == tmp_path / "out/paraphrase/paranmt/para-nmt-50m.tsv.gz"
    assert _gz_lines(out) == [r.encode() for r in rows]
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(_lines(rows[0], "only\ttwo"))
    with pytest.raises(InputError, match=r"bad.tsv:2: expected 3"):
        import_paranmt(bad, tmp_path / "out2")
    bad.write_bytes(_lines(rows[0], "a\tb\tnot-a-score"))
    with pytest.raises(InputError, match=r"bad.tsv:2: score"):
        import_paranmt(bad, tmp_path / "out2")
    assert not (tmp_path / "out2").exists() or not any((tmp_path / "out2").rglob("*.gz"))


def test_senteval_sts_zip(tmp_path):
    folder = "sts2016-english-with-gs-v1.0"
    archive = _zip(
        tmp_path / "STS2016-en-test.zip",
        {
            f"{folder}/STS2016.input.headlines.txt": _lines(
                "A  cat sits.\tA cat is sitting.\tsrc1\tsrc2", "x\ty", "Dogs run\tA dog runs"
            ),
            f"{folder}/STS2016.gs.headlines.txt": _lines("4.000", "", "3.5"),
            f"{folder}/STS2016.gs.ALL.txt": _lines("1"),
            f"{folder}/STS2016.input.nogold.txt": _lines("a\tb"),
        },
    )
    (out,) = import_senteval_sts(archive, tmp_path / "out")
    assert out == tmp_path / "out/sts/en/STS2016/headlines.tsv"
    assert out.read_text() == "4\tA cat sits.\tA cat is sitting.\n3.5\tDogs run\tA dog runs\n"
    mismatch = _zip(
        tmp_path / "STS2012.zip",
        {
            "test-gold/STS.input.MSRpar.txt": _lines("a\tb", "c\td"),
            "test-gold/STS.gs.MSRpar.txt": _lines("1"),
        },
    )
    with pytest.raises(InputError, match="STS.input.MSRpar.txt has 2 lines"):
        import_senteval_sts(mismatch, tmp_path / "out")
    one_column = _zip(
        tmp_path / "STS2014-en-test.zip",
        {
            "x/STS.input.images.txt": _lines("a\tb", "no tab"),
            "x/STS.gs.images.txt": _lines("1", "2"),
        },
    )
    with pytest.raises(InputError, match=r"STS2014-en-test.zip!x/STS.input.images.txt:2: expected"):
        import_senteval_sts(one_column, tmp_path / "out")


def test_import_source_checks_the_promised_datasets(tmp_path):
    archive = _zip(
        tmp_path / "STS2013-en-test.zip",
        {"test-gs/STS.input.FNWN.txt": _lines("a\tb"), "test-gs/STS.gs.FNWN.txt": _lines("2")},
    )
    with pytest.raises(InputError, match="did not produce 23 file.*sts/en/STS2012/MSRpar.tsv"):
        import_source(SOURCES["sts/en"], archive, tmp_path / "out")


TRAIN_ROWS = [
    (
        "main-captions",
        "MSRvid",
        "2012test",
        "0001",
        "5.000",
        "A plane is taking off.",
        "An air plane is taking off.",
    ),
    (
        "main-news",
        "headlines",
        "2013",
        "0042",
        "3.800",
        "A  man  speaks",
        "A man talks",
        "extra-source",
    ),
]


def _stsb_tar(path: Path, splits: dict[str, list[tuple[str, ...]]]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for split, rows in splits.items():
            data = _lines(*["\t".join(r) for r in rows])
            info = tarfile.TarInfo(f"stsbenchmark/sts-{split}.csv")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_stsb_tar(tmp_path):
    archive = _stsb_tar(
        tmp_path / "Stsbenchmark.tar.gz",
        {"train": TRAIN_ROWS, "dev": TRAIN_ROWS[:1], "test": TRAIN_ROWS[1:]},
    )
    import_stsb(archive, tmp_path / "out")
    stsb = tmp_path / "out/sts/stsb"
    assert (
        (stsb / "train.tsv").read_text()
        == "5\tA plane is taking off.\tAn air plane is taking off.\n3.8\tA man speaks\tA man talks\n"
    )
    assert (
        stsb / "train.meta.tsv"
    ).read_text() == "main-captions\tMSRvid\t2012test\t0001\nmain-news\theadlines\t2013\t0042\n"
    assert (stsb / "test.tsv").read_text().count("\n") == 1


def _sts17_zips(
    folder: Path, pairs: dict[str, list[tuple[str, ...]]], unscored_tr: list[tuple[str, str]]
):
    """Eval and gold zips laid out like sts2017.eval.v1.1.zip / sts2017.gs.zip, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    inputs, golds = {}, {}
    for track, pair in sources.STS17_TRACKS.items():
        langs = pair.removesuffix("-WMT")
        rows = [(a, b) for _, a, b in pairs[pair]] + (unscored_tr if track == "track6" else [])
        inputs[f"STS2017.eval.v1.1/STS.input.{track}.{langs}.txt"] = _lines(
            *["\t".join(r) for r in rows]
        )
        golds[f"STS2017.gs/STS.gs.{track}.{langs}.txt"] = _lines(*[s for s, _, _ in pairs[pair]])
    return _zip(folder / "sts2017.eval.v1.1.zip", inputs), _zip(folder / "sts2017.gs.zip", golds)


def test_semeval2017_zips(tmp_path):
    pairs = {
        pair: [("4.2", f"{pair} one", "uno"), ("0", "two", "dos")]
        for pair in sources.STS17_TRACKS.values()
    }
    eval_zip, gs_zip = _sts17_zips(
        tmp_path / "ok", pairs, unscored_tr=[("unscored", "puanlanmamış")] * 2
    )
    outs = import_source(SOURCES["sts/sts17"], [eval_zip, gs_zip], tmp_path / "out")
    assert sorted(p.name for p in outs) == sorted(f"{p}.tsv" for p in sources.STS17_TRACKS.values())
    assert (
        tmp_path / "out/sts/sts17/es-en-WMT.tsv"
    ).read_text() == "4.2\tes-en-WMT one\tuno\n0\ttwo\tdos\n"
    assert (tmp_path / "out/sts/sts17/tr-en.tsv").read_text().count("\n") == 2
    # Only track 6 may carry unscored pairs after the scored ones.
    longer = {**pairs, "ar-ar": [*pairs["ar-ar"], ("1", "three", "tres")]}
    eval_zip, _ = _sts17_zips(tmp_path / "longer", longer, [])
    with pytest.raises(InputError, match=r"track1\.ar-ar\.txt has 3 lines"):
        import_semeval2017(eval_zip, gs_zip, tmp_path / "out2")


def test_tatoeba_files(tmp_path):
    (tmp_path / "tatoeba.spa-eng.spa").write_text("Hola.\nAdiós.\n")
    (tmp_path / "tatoeba.spa-eng.eng").write_text("Hello.\nBye.\n")
    outs = import_tatoeba(
        [tmp_path / "tatoeba.spa-eng.spa", tmp_path / "tatoeba.spa-eng.eng"], tmp_path / "out"
    )
    assert [p.read_text() for p in outs] == ["Hola.\nAdiós.\n", "Hello.\nBye.\n"]
    (tmp_path / "tatoeba.spa-eng.eng").write_text("Hello.\n")
    with pytest.raises(InputError, match=r"tatoeba.spa-eng.spa has 2 lines.*has 1"):
        import_tatoeba(
            [tmp_path / "tatoeba.spa-eng.spa", tmp_path / "tatoeba.spa-eng.eng"], tmp_path / "out2"
        )


# ---------------------------------------------------------------------------------------------
# Importers reproduce the mirror: upstream-format archives rebuilt from the mirror's own
# rows must import back to byte-identical files.


def _padded(score: str) -> str:
    """Scores as upstream writes them ("4.000"); the importer must print them back as %g."""
    return score if "." in score else f"{score}.000"


def _read_rows(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


def test_stsb_import_reproduces_the_mirror(shared_data, tmp_path):
    splits = {}
    for split in ("train", "dev", "test"):
        scored = _read_rows(shared_data / f"sts/stsb/{split}.tsv")
        meta = _read_rows(shared_data / f"sts/stsb/{split}.meta.tsv")
        splits[split] = [(*m, _padded(s), a, b) for m, (s, a, b) in zip(meta, scored, strict=True)]
    import_stsb(_stsb_tar(tmp_path / "Stsbenchmark.tar.gz", splits), tmp_path / "out")
    for split in ("train", "dev", "test"):
        for suffix in (".tsv", ".meta.tsv"):
            name = f"sts/stsb/{split}{suffix}"
            assert (tmp_path / "out" / name).read_bytes() == (shared_data / name).read_bytes(), name


def test_semeval2017_import_reproduces_the_mirror(shared_data, tmp_path):
    pairs = {
        pair: [tuple(r) for r in _read_rows(shared_data / f"sts/sts17/{pair}.tsv")]
        for pair in sources.STS17_TRACKS.values()
    }
    unscored = [("An unscored English sentence.", "Puanlanmamış bir cümle.")] * 250
    eval_zip, gs_zip = _sts17_zips(tmp_path, pairs, unscored)
    import_semeval2017(eval_zip, gs_zip, tmp_path / "out")
    for pair in sources.STS17_TRACKS.values():
        name = f"sts/sts17/{pair}.tsv"
        assert (tmp_path / "out" / name).read_bytes() == (shared_data / name).read_bytes(), name


# ---------------------------------------------------------------------------------------------
# psp data


def test_cli_download_and_import(server, tmp_path, monkeypatch, capsys):
    import argparse

    from psp.cli import data as data_cli

    # Only this command's parser: the full ``psp`` parser imports every other command's stack.
    parser = argparse.ArgumentParser(prog="psp")
    data_cli.register(parser.add_subparsers(dest="command", required=True))

    def main(argv: list[str]) -> int:
        args = parser.parse_args(argv)
        return args.func(args)

    data = _stsb_tar(
        tmp_path / "up.tar.gz", {"train": TRAIN_ROWS, "dev": TRAIN_ROWS, "test": TRAIN_ROWS}
    ).read_bytes()
    server.state.files["/Stsbenchmark.tar.gz"] = data
    monkeypatch.setitem(
        SOURCES, "sts/stsb", replace(SOURCES["sts/stsb"], url=f"{server.base}/Stsbenchmark.tar.gz")
    )
    out = tmp_path / "data"
    assert (
        main(
            ["data", "download", "sts/stsb", "--out", str(out), "--downloads", str(tmp_path / "dl")]
        )
        == 0
    )
    assert (out / "sts/stsb/dev.tsv").read_text().startswith("5\tA plane is taking off.")

    tar = _stsb_tar(
        tmp_path / "other.tar.gz", {"train": TRAIN_ROWS[1:], "dev": TRAIN_ROWS, "test": TRAIN_ROWS}
    )
    assert main(["data", "import", "sts/stsb", str(tar), "--out", str(tmp_path / "data2")]) == 0
    assert (tmp_path / "data2/sts/stsb/train.tsv").read_text() == "3.8\tA man speaks\tA man talks\n"

    server.state.files.clear()
    assert (
        main(
            [
                "data",
                "download",
                "sts/stsb",
                "--out",
                str(out),
                "--downloads",
                str(tmp_path / "dl2"),
            ]
        )
        == 2
    )
    assert "HTTP 404" in capsys.readouterr().err


def test_senteval_sts_import_reproduces_the_mirror(shared_data, tmp_path):
    """Five zips in the SemEval layouts (2016 names its files STS2016.*), one per year."""
    zips = []
    for year, datasets in sources.STS_DATASETS.items():
        prefix = "STS2016" if year == 2016 else "STS"
        members = {}
        for dataset in datasets:
            rows = _read_rows(shared_data / f"sts/en/STS{year}/{dataset}.tsv")
            members[f"test/{prefix}.input.{dataset}.txt"] = _lines(
                *[f"{a}\t{b}" for _, a, b in rows]
            )
            members[f"test/{prefix}.gs.{dataset}.txt"] = _lines(*[_padded(s) for s, _, _ in rows])
        zips.append(_zip(tmp_path / f"STS{year}-en-test.zip", members))
    written = import_source(SOURCES["sts/en"], zips, tmp_path / "out")
    assert len(written) == 24
    for path in written:
        name = path.relative_to(tmp_path / "out")
        assert path.read_bytes() == (shared_data / name).read_bytes(), name


def test_tatoeba_import_reproduces_the_mirror(shared_data, tmp_path):
    files = resolve("tatoeba", mirror=shared_data)
    written = import_source(SOURCES["tatoeba"], files, tmp_path / "out")
    assert len(written) == 224
    for path in written:
        assert path.read_bytes() == (shared_data / "tatoeba" / path.name).read_bytes(), path.name
