"""Download faults: ``psp data download`` against a real HTTP server on 127.0.0.1 that drops the
connection, leaves out Content-Length or answers 200 with an HTML error page.

Each case runs the command (its parser and error reporting; the registry entry points at the
local server) and checks the exit status, the message, and what is left on disk: never a file
that a rerun would take for a good download.
"""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import replace

import pytest

from psp.cli import main
from psp.data.sources import SOURCES
from psp.data.sources.verify import LOCK_NAME

from .fileserver import serve

URL_PATH = "/Stsbenchmark.tar.gz"


@pytest.fixture
def server():
    yield from serve()


@pytest.fixture(scope="module")
def upstream(shared_data) -> bytes:
    """``Stsbenchmark.tar.gz`` in the upstream layout, rebuilt from the first rows of the mirror."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for split in ("train", "dev", "test"):
            stsb = shared_data / "sts" / "stsb"
            rows = (stsb / f"{split}.tsv").read_text().splitlines()[:40]
            meta = (stsb / f"{split}.meta.tsv").read_text().splitlines()[:40]
            data = "".join(f"{m}\t{r}\n" for m, r in zip(meta, rows, strict=True)).encode()
            info = tarfile.TarInfo(f"stsbenchmark/sts-{split}.csv")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def stsb(server, upstream, monkeypatch, tmp_path):
    """The registry's STS Benchmark served by ``server``; returns the command's arguments."""
    server.state.files[URL_PATH] = upstream
    monkeypatch.setitem(
        SOURCES, "sts/stsb", replace(SOURCES["sts/stsb"], url=server.base + URL_PATH)
    )
    args = ["data", "download", "sts/stsb", "--out", tmp_path / "data"]
    return [str(a) for a in [*args, "--downloads", tmp_path / "dl", "--timeout", "5"]]


def downloads(tmp_path) -> list[str]:
    folder = tmp_path / "dl"
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


ARCHIVE = "sts/stsb/Stsbenchmark.tar.gz"


def test_dropped_connection_resumes_with_range(stsb, server, tmp_path):
    server.state.drop_after = 1000
    assert main(stsb) == 0
    assert [status for *_, status in server.state.requests] == [200, 206]
    assert (tmp_path / "data/sts/stsb/test.tsv").exists()


def test_killed_download_resumes_from_its_part(stsb, server, upstream, tmp_path):
    part = tmp_path / "dl" / (ARCHIVE + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(upstream[:1500])  # what a killed run leaves
    assert main(stsb) == 0
    assert server.state.requests == [(URL_PATH, "bytes=1500-", 206)]
    assert ARCHIVE in downloads(tmp_path) and ARCHIVE + ".part" not in downloads(tmp_path)


def test_body_cut_short_without_content_length_is_fetched_again(stsb, server, tmp_path):
    server.state.no_length = True
    server.state.drop_after = 1000  # looks complete: the connection closes, no length to check
    assert main(stsb) == 0
    assert [status for *_, status in server.state.requests] == [200, 200]
    assert (tmp_path / "data/sts/stsb/dev.tsv").read_text().count("\n") == 40


def test_body_always_cut_short_fails_and_caches_nothing(stsb, server, tmp_path, capsys):
    server.state.no_length = True
    for attempt in range(5):
        server.state.drop_after = 1000
        assert main([*stsb, "--retries", "0"]) == 2
        assert "Stsbenchmark.tar.gz: incomplete or corrupt" in capsys.readouterr().err
        assert downloads(tmp_path) == [], attempt
    assert len(server.state.requests) == 5  # every rerun asks again: nothing was cached
    assert not (tmp_path / "data").exists()


def test_html_error_page_with_status_200_is_refused(stsb, server, tmp_path, capsys):
    server.state.error_page_next = 1
    assert main(stsb) == 2
    assert "sent an HTML page, not the file" in capsys.readouterr().err
    assert downloads(tmp_path) == []
    assert main(stsb) == 0  # the rerun downloads it
    assert downloads(tmp_path) == sorted([ARCHIVE, LOCK_NAME])


def test_lock_file_holds_later_downloads_to_the_first(stsb, server, upstream, tmp_path, capsys):
    assert main(stsb) == 0
    lock = json.loads((tmp_path / "dl" / LOCK_NAME).read_text())
    assert lock[server.base + URL_PATH]["size"] == len(upstream)
    (tmp_path / "dl" / ARCHIVE).unlink()
    server.state.files[URL_PATH] = upstream[:-4000] + bytes(4000)  # upstream changed
    assert main(stsb) == 2
    err = capsys.readouterr().err
    assert LOCK_NAME in err and "recorded on its first download" in err
    assert downloads(tmp_path) == [LOCK_NAME]


def test_download_that_fails_import_is_set_aside_and_fetched_again(
    stsb, server, upstream, tmp_path, capsys
):
    """A whole, valid archive of the wrong content passes every download check; the import
    catches it, and the file must not stay where every rerun would find it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("stsbenchmark/readme.txt")
        tar.addfile(info, io.BytesIO(b""))
    server.state.files[URL_PATH] = buffer.getvalue()
    assert main(stsb) == 2
    err = capsys.readouterr().err
    assert "no sts-dev/test/train.csv inside" in err and "the next run downloads it again" in err
    assert downloads(tmp_path) == sorted([ARCHIVE + ".rejected", LOCK_NAME])
    assert json.loads((tmp_path / "dl" / LOCK_NAME).read_text()) == {}
    server.state.files[URL_PATH] = upstream
    assert main(stsb) == 0
    assert (tmp_path / "data/sts/stsb/train.tsv").exists()
