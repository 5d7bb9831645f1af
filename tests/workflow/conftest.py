"""Workflow fixtures: a slice of the real data mirror and a helper that runs Snakemake on it."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def run_snakemake(
    args: list[str], workdir: Path, check: bool = True
) -> subprocess.CompletedProcess:
    """Run the repository's Snakefile with ``workdir`` as its working directory."""
    cmd = [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir), *args]
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
        )
    return proc


def _copy_head(src: Path, dst: Path, lines: int | None) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rb") as fin, opener(dst, "wb") as fout:
        for i, line in enumerate(fin):
            if lines is not None and i >= lines:
                break
            fout.write(line)


@pytest.fixture(scope="session")
def mirror_slice(shared_data: Path, tmp_path_factory) -> Path:
    """The first few hundred lines of every file the default config reads, laid out as a mirror."""
    root = tmp_path_factory.mktemp("mirror")
    heads = {
        "bitext": 600,
        "paraphrase/parasci": 600,
        "paraphrase/flickr30k-captions": 300,
        "mono": 400,
        "sts": None,
        "tatoeba": 200,
    }
    for folder, lines in heads.items():
        for src in sorted((shared_data / folder).rglob("*")):
            if not src.is_file():
                continue
            _copy_head(src, root / src.relative_to(shared_data), lines)
    (root / "SOURCES.md").write_text("slice of the data mirror for workflow tests\n")
    return root


def write_config(path: Path, base: Path, **overrides) -> Path:
    """A config file: ``base`` (a YAML file) updated by ``overrides`` (top-level keys)."""
    config = yaml.safe_load(base.read_text())
    config.update(overrides)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


#: Training small enough for a whole DAG to run in a minute or two on 2 cores.
TINY_TRAIN = {"dim": 48, "epochs": 2, "batch_size": 32, "megabatch_size": 4, "anneal": 5}


def shrink_models(models: dict) -> None:
    """Give every model entry a 600-piece SentencePiece model and :data:`TINY_TRAIN`."""
    for entry in models.values():
        entry["spm"] = {"vocab_size": 600}
        entry["train"] = dict(TINY_TRAIN)
