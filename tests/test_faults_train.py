"""``psp train`` killed outright (SIGKILL: no handler runs, nothing is flushed) and resumed ends
with the very parameters of a run that was never interrupted."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import time

import pytest
import torch
from safetensors.torch import load_file

from .faults import PSP, run_psp, temporaries

SETTINGS = ["--dim", "16", "--epochs", "3", "--batch-size", "32", "--megabatch-size", "4"]
SETTINGS += ["--threads", "1", "--no-eval"]


@pytest.fixture(scope="module")
def training_data(shared_data, tmp_path_factory):
    """1,500 real es-en pairs in the training HDF5, their SentencePiece model, a config file."""
    from psp.data.pairs_store import write_pairs
    from psp.data.spm_training import train_spm
    from psp.io import atomic_open

    root = tmp_path_factory.mktemp("train")
    base = shared_data / "bitext" / "es-en" / "wmt-newstest"
    with gzip.open(f"{base}.es.gz", "rt") as es, gzip.open(f"{base}.en.gz", "rt") as en:
        pairs = [(a.strip().lower(), b.strip().lower()) for a, b in zip(es, en)]
    pairs = [(a, b) for a, b in pairs if a and b and "\t" not in a + b][:1500]
    with atomic_open(root / "pairs.tsv.gz") as out:
        out.writelines(f"{a}\t{b}\n" for a, b in pairs)
    spm = train_spm([s for pair in pairs for s in pair], root / "spm.model", vocab_size=300)
    write_pairs(root / "pairs.tsv.gz", spm, root / "pairs.h5", seed=0)
    config = {"checkpoint_every": 10, "anneal": 5, "log_every": 5, "select_best": False}
    (root / "config.json").write_text(json.dumps(config))
    return ["--h5", root / "pairs.h5", "--spm", spm, "--config", root / "config.json"]


def train_args(training_data, model, work):
    return [
        str(a)
        for a in ["train", *training_data, *SETTINGS, "--model-dir", model, "--work-dir", work]
    ]


def test_training_killed_with_sigkill_resumes_bit_exactly(training_data, tmp_path):
    straight = run_psp(*train_args(training_data, tmp_path / "a", tmp_path / "wa"))
    assert straight.returncode == 0, straight.stderr

    state = tmp_path / "wb" / "checkpoints" / "state.json"
    killed = subprocess.Popen(
        [str(PSP), *train_args(training_data, tmp_path / "b", tmp_path / "wb")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not state.exists() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert killed.poll() is None, "training ended before its first checkpoint could be killed"
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert not (tmp_path / "b").exists()
    step = json.loads(state.read_text())["state"]["step"]
    resumed = run_psp(*train_args(training_data, tmp_path / "b", tmp_path / "wb"), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert (
        0 < step < json.loads((tmp_path / "b" / "config.json").read_text())["provenance"]["steps"]
    )
    weights = [load_file(tmp_path / run / "embeddings.safetensors") for run in ("a", "b")]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][key], weights[1][key]) for key in weights[0])
    assert temporaries(tmp_path / "wb") == []
