"""``psp mine`` faults: blank lines, a replaced model, an empty side, two runs on one output,
fewer lines than shards, degenerate neighbourhoods, ``mine_texts`` killed in its temp folder.
Each case runs the real command (or function) on real sentences with a small model and checks
the exit status, the message and what is left behind.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from psp.cli import main
from psp.io import temp_dir

from .faults import pair_filter_flags_off, pair_filters_off, run_psp, temporaries


@pytest.fixture(scope="module")
def sentences(news) -> tuple[list[str], list[str]]:
    """Real sentences for both sides (English on both: an untrained model does not care)."""
    return news[:12], news[100:115]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def mine(model, src, tgt, out, *extra) -> int:
    """``psp mine`` in this process (the command's own code, minus the start-up of torch and
    Faiss a subprocess pays each time; the first case runs it as a subprocess)."""
    argv = ["mine", "--model", model, "--src-file", src, "--tgt-file", tgt, "--output", out]
    return main([str(arg) for arg in [*argv, *extra]])


def outputs(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def mined_rows(out: Path) -> list[list[str]]:
    return [line.split("\t") for line in gzip.open(out, "rt").read().splitlines()]


def test_blank_lines_are_skipped_and_counted(tiny_model, sentences, tmp_path):
    es, en = sentences
    src = write_lines(tmp_path / "src.txt", ["", *es[:6], "   ", "\t", *es[6:], ""])
    tgt = write_lines(tmp_path / "tgt.txt", [" ", *en, ""])
    out = tmp_path / "out" / "mined.tsv.gz"
    argv = ["--model", tiny_model, "--src-file", src, "--tgt-file", tgt, "--output", out]
    proc = run_psp("mine", *argv, "--threshold=-1e9", "--shards", "2")
    assert proc.returncode == 0, proc.stderr
    rows = mined_rows(out)
    assert rows and all(row[1].strip() and row[2].strip() for row in rows)
    assert {row[1] for row in rows} <= set(es) and {row[2] for row in rows} <= set(en)
    stats = json.loads((out.parent / "mined.stats.json").read_text())
    assert stats["blank_lines"] == {"src": 4, "tgt": 2}
    assert (stats["n_src"], stats["n_tgt"]) == (len(es), len(en))
    assert stats["src_file"] == str(src)


def test_a_side_of_blank_lines_is_an_error_that_leaves_nothing(
    tiny_model, sentences, tmp_path, capsys
):
    src = write_lines(tmp_path / "src.txt", sentences[0])
    tgt = write_lines(tmp_path / "tgt.txt", ["", " ", ""])
    out = tmp_path / "out" / "mined.tsv.gz"
    assert mine(tiny_model, src, tgt, out) == 2
    err = capsys.readouterr().err
    assert f"{tgt}: empty corpus (no lines to mine; 3 blank line(s))" in err
    assert outputs(out.parent) == []  # no output, no work dir


def test_empty_source_leaves_nothing(tiny_model, sentences, tmp_path, capsys):
    src = write_lines(tmp_path / "src.txt", [])
    tgt = write_lines(tmp_path / "tgt.txt", sentences[1])
    out = tmp_path / "out" / "mined.tsv.gz"
    assert mine(tiny_model, src, tgt, out) == 2
    assert f"{src}: empty corpus" in capsys.readouterr().err
    assert outputs(out.parent) == []


def test_a_model_replaced_in_place_is_not_reused_from_the_work_dir(
    spm_path, sentences, tmp_path, capsys, caplog
):
    from psp.model.torch_model import PSPModel

    model = tmp_path / "model"
    PSPModel.from_spm(spm_path, dim=16, seed=1).save(model)
    src = write_lines(tmp_path / "src.txt", sentences[0])
    tgt = write_lines(tmp_path / "tgt.txt", sentences[1])
    work, out = tmp_path / "work", tmp_path / "out" / "mined.tsv.gz"
    assert mine(model, src, tgt, out, "--work-dir", work) == 0
    first = out.read_bytes()
    other = PSPModel.from_spm(spm_path, dim=16, seed=2).save(tmp_path / "other")
    os.replace(other / "embeddings.safetensors", model / "embeddings.safetensors")  # retrained
    assert mine(model, src, tgt, out, "--work-dir", work) == 2
    err = capsys.readouterr().err
    assert f"{work}: its manifest.json records a different model embeddings.safetensors," in err
    assert out.read_bytes() == first  # the earlier result stays; nothing half-written
    # The run's own work dir (no --work-dir), left by a crash, is rebuilt instead, saying so.
    os.rename(work, out.with_name(out.name + ".work"))
    assert mine(model, src, tgt, out) == 0
    assert "records a different model embeddings.safetensors; rebuilding it" in caplog.text
    assert out.read_bytes() != first
    fresh = tmp_path / "fresh.tsv.gz"
    assert mine(model, src, tgt, fresh) == 0
    assert out.read_bytes() == fresh.read_bytes()
    assert outputs(out.parent) == ["mined.histogram.png", "mined.stats.json", "mined.tsv.gz"]


def test_a_run_killed_midway_is_resumed_from_its_work_dir(
    tiny_model, sentences, tmp_path, monkeypatch
):
    src = write_lines(tmp_path / "src.txt", sentences[0])
    tgt = write_lines(tmp_path / "tgt.txt", sentences[1])
    out = tmp_path / "out" / "mined.tsv.gz"
    work = out.with_name(out.name + ".work")
    assert mine(tiny_model, src, tgt, out, "--work-dir", work, "--shards", "2") == 0
    first = out.read_bytes()
    out.unlink()  # what a kill before the output leaves: the work dir, no output

    def embed_again(*args, **kwargs):
        raise AssertionError("a resumed run embedded a shard again")

    monkeypatch.setattr("psp.mine.pipeline.embed_shard", embed_again)
    assert mine(tiny_model, src, tgt, out, "--shards", "2") == 0
    assert out.read_bytes() == first
    assert outputs(out.parent) == ["mined.histogram.png", "mined.stats.json", "mined.tsv.gz"]


def test_a_second_run_on_the_same_output_is_refused_while_the_first_holds_it(
    tiny_model, sentences, tmp_path, capsys
):
    src = write_lines(tmp_path / "src.txt", sentences[0])
    tgt = write_lines(tmp_path / "tgt.txt", sentences[1])
    out = tmp_path / "out" / "mined.tsv.gz"
    work = out.with_name(out.name + ".work")
    work.mkdir(parents=True)
    with open(work / ".lock", "w") as lock:  # what the first run holds while it works
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert mine(tiny_model, src, tgt, out) == 2
    assert "in use by another psp mine run" in capsys.readouterr().err
    assert outputs(out.parent) == ["mined.tsv.gz.work"]  # the first run's, untouched
    assert mine(tiny_model, src, tgt, out) == 0
    assert outputs(out.parent) == ["mined.histogram.png", "mined.stats.json", "mined.tsv.gz"]


def test_fewer_lines_than_shards(tiny_model, sentences, tmp_path):
    src = write_lines(tmp_path / "src.txt", sentences[0][:1])
    tgt = write_lines(tmp_path / "tgt.txt", sentences[1])
    out = tmp_path / "mined.tsv.gz"
    flags = ["--shards", "3", "--threshold=-1e9", *pair_filter_flags_off()]
    assert mine(tiny_model, src, tgt, out, *flags) == 0
    assert [row[1] for row in mined_rows(out)] == sentences[0][:1]
    assert temporaries(tmp_path) == []


def hand_made_model(spm_path: Path, rows: dict[str, list[float]], folder: Path) -> Path:
    """A model whose one-piece words embed to the given vectors (every other row is zero)."""
    import torch

    from psp.model.torch_model import PSPModel

    model = PSPModel.from_spm(spm_path, dim=4)
    weight = torch.zeros_like(model.embedding.weight)
    for word, vector in rows.items():
        (piece,) = model.encoder.encode([word])[0]
        weight[piece] = torch.tensor(vector)
    model.embedding.weight.data = weight
    return model.save(folder)


def test_ratio_margin_does_not_inflate_a_non_positive_neighbourhood(spm_path, tmp_path):
    """``the``'s neighbourhood mean is negative (one cosine of 0.1, three of -1): the old 1e-6
    floor on the ratio's denominator scored (the, and) 100,000 and kept it."""
    model = hand_made_model(
        spm_path,
        {"the": [1, 0, 0, 0], "and": [0.1, np.sqrt(0.99), 0, 0], "that": [-1, 0, 0, 0]},
        tmp_path / "model",
    )
    src = write_lines(tmp_path / "src.txt", ["the"])
    tgt = write_lines(tmp_path / "tgt.txt", ["and", "that", "that", "that"])
    out = tmp_path / "mined.tsv.gz"
    assert mine(model, src, tgt, out, "--threshold", "1.0") == 0
    assert mined_rows(out) == []
    assert json.loads((tmp_path / "mined.stats.json").read_text())["kept"] == 0


def test_workflow_mines_a_one_line_side_with_more_shards_than_lines(
    tiny_model, shared_data, sentences, tmp_path
):
    """The workflow's DAG has a fixed shard count, so the plan has empty shards; each of their
    jobs must be trivial and the reduce must still find every row."""
    import shutil

    import yaml

    from .workflow.conftest import REPO, run_snakemake

    shutil.copytree(tiny_model, tmp_path / "results/models/es-en")
    src = write_lines(tmp_path / "src.txt", sentences[0][:1])
    tgt = write_lines(tmp_path / "tgt.txt", sentences[1][:6])
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["mirror"] = str(shared_data)
    config["mining"]["es-en"].update(
        src=[str(src)],
        tgt=[str(tgt)],
        shards=2,
        langid=False,
        min_tokens=0,
        # cosine itself, so every candidate passes (a tiny model's ratio margin may be -inf)
        margin="absolute",
        threshold=-1e9,
        **pair_filters_off(),
    )
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    mining_rules = ["mine_text", "embed_shard", "train_index", "index_shard", "knn_shard_pair"]
    run_snakemake(
        [
            "results/mine/es-en/es-en.tsv.gz",
            "--cores",
            "2",
            "--configfile",
            str(tmp_path / "config.yaml"),
            "--allowed-rules",
            *mining_rules,
            "score_mined",
        ],
        tmp_path,
    )
    rows = mined_rows(tmp_path / "results/mine/es-en/es-en.tsv.gz")
    assert [row[1] for row in rows] == sentences[0][:1]
    assert temporaries(tmp_path / "results") == []


# mine_texts in a child that announces its pid and is killed outright (no handler runs) inside
# its temporary folder; the parent finds that folder in the child's TMPDIR.
_MINE_TEXTS = """import sys
import psp
from psp.mine.pipeline import mine_texts
model = psp.load(sys.argv[1])
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()
mine_texts(model, lines, lines)
"""


def test_the_temp_folder_of_a_killed_mine_texts_is_swept_by_the_next(tiny_model, news, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    text = write_lines(tmp_path / "sents.txt", news * 3)
    child = subprocess.Popen(
        [sys.executable, "-c", _MINE_TEXTS, str(tiny_model), str(text)],
        env=os.environ | {"TMPDIR": str(tmp)},
    )
    # Wait for the miner's own folder: tempfile first probes TMPDIR with a file it deletes at once.
    deadline = time.monotonic() + 120
    while (
        not list(tmp.glob(".psp-mine.*")) and child.poll() is None and time.monotonic() < deadline
    ):
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL, "mine_texts ended before it could be killed"
    (left,) = tmp.iterdir()
    assert left.name.startswith(f".psp-mine.{socket.gethostname()}-{child.pid}.")
    # Another program's folder of the same pattern, and one of a live process, stay.
    other = tmp / f".other.{socket.gethostname()}-{child.pid}.abcdefgh"
    live = tmp / f".psp-mine.{socket.gethostname()}-{os.getpid()}.abcdefgh"
    other.mkdir()
    live.mkdir()
    with temp_dir("psp-mine", tmp) as mine:
        assert sorted(tmp.iterdir()) == sorted([other, live, mine])
    assert sorted(tmp.iterdir()) == sorted([other, live])
