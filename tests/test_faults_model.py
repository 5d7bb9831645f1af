"""Model directory faults, through ``psp embed`` and ``psp score``: a ``config.json`` value of the
wrong type or range, a pickle where safetensors belong, sentences with no known piece, files
only their owner can read, and temporaries left by a killed run."""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import platform
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from psp.cli import main

from .faults import PSP, run_psp, temporaries


@pytest.fixture
def model_copy(tiny_model, tmp_path):
    return shutil.copytree(tiny_model, tmp_path / "model")


@pytest.fixture(scope="module")
def lines_file(news, tmp_path_factory):
    path = tmp_path_factory.mktemp("input") / "sents.txt"
    path.write_text("".join(f"{line}\n" for line in news[:50]))
    return path


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("lowercase", "false", "'false' is not of type 'boolean'"),
        ("languages", "es", "'es' is not of type 'array'"),
        ("dim", 16.5, "16.5 is not of type 'integer'"),
        ("max_pieces", -1, "-1 is less than the minimum of 1"),
        ("max_pieces", "7", "'7' is not of type 'integer', 'null'"),
        ("provenance", ["x"], "['x'] is not of type 'object'"),
    ],
)
def test_config_json_types_and_ranges_are_checked(model_copy, lines_file, key, value, says, capsys):
    config = model_copy / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {key: value}))
    out = model_copy.parent / "out.npy"
    assert (
        main(
            ["embed", "--model", str(model_copy), "--input", str(lines_file), "--output", str(out)]
        )
        == 2
    )
    assert f"psp embed: error: {config}: key '{key}': {says}" in capsys.readouterr().err
    assert not out.exists() and temporaries(model_copy.parent) == []


class _Payload:
    """Unpickling this runs ``touch``: what a malicious "model file" would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_in_place_of_the_weights_is_refused_unread(model_copy, lines_file):
    marker = model_copy.parent / "pwned"
    weights = model_copy / "embeddings.safetensors"
    weights.write_bytes(pickle.dumps(_Payload(marker)))
    out = model_copy.parent / "out.npy"
    proc = run_psp("embed", "--model", model_copy, "--input", lines_file, "--output", out)
    assert proc.returncode == 2
    assert f"{weights}: unreadable safetensors file" in proc.stderr
    assert not marker.exists() and not out.exists()


@pytest.mark.parametrize(
    "tensors, says",
    [
        ({"embedding.weight": np.zeros((4, 2), np.int32)}, "has non-float dtype I32"),
        ({"other": np.zeros((4, 2), np.float32)}, "expected one tensor 'embedding.weight'"),
        (
            {"embedding.weight": np.zeros((4, 2), np.float32), "x": np.zeros(1, np.float32)},
            "expected one tensor 'embedding.weight', found ['embedding.weight', 'x']",
        ),
    ],
)
def test_a_weights_file_of_other_tensors_is_named(model_copy, tensors, says):
    from safetensors.numpy import save_file

    from psp.io import InputError
    from psp.model.directory import read_model_dir

    weights = model_copy / "embeddings.safetensors"
    save_file(tensors, str(weights))
    with pytest.raises(InputError) as err:
        read_model_dir(model_copy)
    assert str(err.value).startswith(f"{weights}: ") and says in str(err.value)


def test_the_table_reads_back_bit_for_bit_in_float32_and_float16(model_copy):
    from safetensors.numpy import load_file, save_file

    from psp.model.directory import read_model_dir

    weights = model_copy / "embeddings.safetensors"
    table = load_file(str(weights))["embedding.weight"]
    assert np.array_equal(read_model_dir(model_copy)[2], table)
    save_file({"embedding.weight": table.astype(np.float16)}, str(weights))
    assert np.array_equal(
        read_model_dir(model_copy)[2], table.astype(np.float16).astype(np.float32)
    )


def test_outputs_get_the_umask_mode(tiny_model, lines_file, tmp_path):
    """Every file of a saved model and every output is group- and world-readable under the
    usual umask 022 (safetensors and mkstemp create 0600)."""
    for name in ("config.json", "sentencepiece.model", "embeddings.safetensors"):
        assert stat.S_IMODE((tiny_model / name).stat().st_mode) == 0o644, name
    out = tmp_path / "out.npy"
    assert (
        run_psp("embed", "--model", tiny_model, "--input", lines_file, "--output", out).returncode
        == 0
    )
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_a_killed_run_leaves_temporaries_that_the_next_run_removes(
    tiny_model, lines_file, tmp_path
):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".out.npy.{socket.gethostname()}-{dead.pid}.k1ll3d_x.tmp"
    stale.write_bytes(b"\x93NUMPY partial rows of a run killed with SIGKILL")
    out = tmp_path / "out.npy"
    proc = run_psp("embed", "--model", tiny_model, "--input", lines_file, "--output", out)
    assert proc.returncode == 0, proc.stderr
    assert not stale.exists() and temporaries(tmp_path) == []
    assert np.load(out).shape == (50, 16)


def _embedding_from_an_open_pipe(model, lines, out) -> subprocess.Popen:
    """``psp embed`` reading ``lines`` from a pipe left open, once it writes its temporary."""
    proc = subprocess.Popen(
        [str(PSP), "embed", "--model", str(model), "--input", "-", "--output", str(out)],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdin.write("".join(f"{line}\n" for line in lines).encode())
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while not temporaries(out.parent) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert temporaries(out.parent), "psp embed never started writing"
    return proc


def _assert_terminated_cleanly(proc: subprocess.Popen, out) -> None:
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert "Traceback" not in proc.stderr.read().decode()
    assert temporaries(out.parent) == [] and not out.exists()


def test_sigterm_removes_the_temporary_output(tiny_model, news, tmp_path):
    """``psp embed`` terminated while it streams stdin into its output: no output, no temporary."""
    out = tmp_path / "out.npy"
    proc = _embedding_from_an_open_pipe(tiny_model, news * 4, out)
    proc.send_signal(signal.SIGTERM)
    _assert_terminated_cleanly(proc, out)


TGKILL = {"x86_64": 234, "aarch64": 131}  # Linux syscall numbers


def _wait_until_idle(pid: int, *, quiet_s: float = 1.0) -> None:
    """Until the main thread has slept for ``quiet_s``: all input done, waiting on the pipe."""
    deadline, quiet_since = time.monotonic() + 60, time.monotonic()
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/task/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
        now = time.monotonic()
        if state != "S":
            quiet_since = now
        elif now - quiet_since >= quiet_s:
            return
        time.sleep(0.02)
    raise AssertionError("psp embed never went idle on its open pipe")


@pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() not in TGKILL, reason="tgkill is Linux's"
)
def test_sigterm_delivered_to_a_worker_thread_still_ends_the_run(tiny_model, news, tmp_path):
    """The kernel gives a process's SIGTERM to any of its threads. Taken by a worker thread, it
    never interrupted the main thread's read of an idle pipe, and ``psp embed`` waited forever
    (one run in about 40 on a loaded machine); here it is sent to each worker on purpose."""
    out = tmp_path / "out.npy"
    proc = _embedding_from_an_open_pipe(tiny_model, news * 4, out)
    _wait_until_idle(proc.pid)
    workers = [int(tid) for tid in os.listdir(f"/proc/{proc.pid}/task") if int(tid) != proc.pid]
    assert workers, "psp embed runs no worker thread"
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    for tid in workers:  # the first to take it ends the run: later ones may find it gone
        syscall(TGKILL[platform.machine()], proc.pid, tid, signal.SIGTERM)
    _assert_terminated_cleanly(proc, out)


def test_sentences_without_a_known_piece_never_score_as_a_match(tiny_model):
    pairs = ["\t", "ꙮꙮꙮ\t҈҈҈", "the cat sleeps\t", "\tthe cat sleeps", "the cat\tthe cat"]
    proc = run_psp(
        "score", "--model", tiny_model, "--input", "-", "--output", "-", stdin="\n".join(pairs)
    )
    assert proc.returncode == 0, proc.stderr
    scores = [float(line.rsplit("\t", 1)[1]) for line in proc.stdout.splitlines()]
    assert scores[:4] == [0.0, 0.0, 0.0, 0.0]
    assert scores[4] == pytest.approx(1.0)
