"""The workflow under a storage plugin: every file a rule reads or writes is an input or output.

With ``--default-storage-provider fs`` each job reads local copies of its inputs, staged from
the storage prefix, and its outputs are uploaded there afterwards. The data mirror lies in the
storage too (``mirror: data``, as data on shared storage would), and the working directory
holds neither data nor results, so a script that opened a path of its own (from ``params``, or
beside one of its files) fails, and a file written but not declared never reaches the storage.
The run must leave in the storage the files a local run leaves in results/, with the same
content.
"""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
import yaml
from safetensors.numpy import load_file

from .conftest import run_snakemake
from .test_run import config_options, tiny_config

pytest.importorskip("snakemake_storage_plugin_fs")
pytestmark = pytest.mark.skipif(
    shutil.which("rsync") is None, reason="snakemake-storage-plugin-fs copies with rsync"
)

# The data stage, training, evaluation (with the untrained floor), the BUCC-style task and mining
# (shard plans, embedding shards, kNN grid and reduce).
TARGETS = ["eval_es_en", "bucc_es_en", "mine_es_en"]


def _files(root):
    return {
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and "checkpoints" not in path.parts
    }


@pytest.fixture(scope="module")
def runs(mirror_slice, tmp_path_factory):
    """The results/ of a local run, the storage's results/ and the working directory of a
    storage run, on the same config."""
    config = tiny_config("data")
    # One training worker: several update one table without locks, so two runs of the same
    # training differ in the last bits (docs/training.md), and this test compares files exactly.
    for entry in config["models"].values():
        entry["train"]["workers"] = 1
    local = tmp_path_factory.mktemp("local")
    (local / "data").symlink_to(mirror_slice)
    (local / "config.yaml").write_text(yaml.safe_dump(config))
    run_snakemake([*TARGETS, "--cores", "2", *config_options(local / "config.yaml")], local)

    storage = tmp_path_factory.mktemp("storage")
    shutil.copytree(mirror_slice, storage / "data")
    work = tmp_path_factory.mktemp("work")
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    storage_options = ["--default-storage-provider", "fs", "--default-storage-prefix", str(storage)]
    run_snakemake(
        [*TARGETS, "--cores", "2", *config_options(work / "config.yaml"), *storage_options],
        work,
    )
    return local / "results", storage / "results", work


def test_every_file_reaches_the_storage(runs):
    """Checkpoints aside (local on purpose, see rules/train.smk), the same files as locally."""
    local, stored, work = runs
    assert _files(stored) == _files(local)
    assert not (work / "results").exists()
    assert not (work / "data").exists()


def test_same_results_as_a_local_run(runs):
    local, stored, _ = runs
    for pairs in ("data/es-en/pairs.tsv.gz", "mine/es-en/es-en.tsv.gz"):
        assert gzip.open(stored / pairs).read() == gzip.open(local / pairs).read()
    for name in ("data/es-en/filter_stats.json", "eval/es-en/sts17.csv", "bucc/es-en/bucc.json"):
        assert (stored / name).read_text() == (local / name).read_text()
    for model in ("es-en", "untrained/es-en"):
        name = f"models/{model}/embeddings.safetensors"
        stored_tensors, local_tensors = load_file(stored / name), load_file(local / name)
        assert stored_tensors.keys() == local_tensors.keys()
        for key, tensor in local_tensors.items():
            assert (stored_tensors[key] == tensor).all(), f"{name}: {key}"
        metrics = f"eval/{model}/metrics.json"
        stored_metrics = json.loads((stored / metrics).read_text())["metrics"]
        assert stored_metrics == json.loads((local / metrics).read_text())["metrics"]
