"""The README says only what runs: every command of its shell blocks is run here, or dry-run.

The commands are parsed from README.md itself, so the README and these tests cannot drift
apart: a Snakemake command is dry-run as written (from the repository root, with ``-n`` and a
scratch ``--directory`` appended, the data mirror's path replaced by the one the tests use),
``make run`` through the Snakemake command its recipe prints, ``psp embed`` for real on a small
model. A command of any other kind fails :func:`test_every_readme_command_is_covered` until a
test covers it. The Snakemake commands of the docs pages are dry-run the same way.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import psp

from .conftest import REPO
from .test_dag import job_counts

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
SHELL_BLOCK = re.compile(r"^```(?:bash|sh)\n(.*?)^```", re.S | re.M)
#: Where the pages put the data mirror; the tests' mirror replaces them.
PAGE_MIRRORS = ("../shared/data", "/shared/mirror")
#: The storage prefix docs/mining.md names; a scratch one holding the mirror as data/ replaces it.
PAGE_STORAGE = "/shared/psp"

#: README commands no test runs, and what covers them instead.
COVERED_ELSEWHERE = {
    "make test": "the test suite itself, which make test runs after linting",
    ". .venv/bin/activate": "make install creates .venv; activating it only sets PATH",
}


def shell_lines(page: Path = README) -> list[str]:
    """Each command line of a page's bash/sh blocks, as written (trailing comment kept)."""
    text = page.read_text(encoding="utf-8")
    return [line.strip() for block in SHELL_BLOCK.findall(text) for line in block.splitlines()]


def readme_commands() -> list[list[str]]:
    """The README's shell commands, split into arguments, comments dropped."""
    split = (shlex.split(line, comments=True) for line in shell_lines())
    return [args for args in split if args]


def snakemake_commands(pages: list[Path]) -> list[str]:
    split = (shlex.split(line, comments=True) for page in pages for line in shell_lines(page))
    return [shlex.join(args) for args in split if args[:1] == ["snakemake"]]


def paper_command() -> str:
    """The README's command for the paper's reproduction (exactly one names configs/paper.yaml)."""
    (command,) = [c for c in snakemake_commands([README]) if "configs/paper.yaml" in c]
    return command


def test_every_readme_command_is_covered():
    """Snakemake commands are dry-run, ``make run`` through its recipe, ``psp embed`` runs."""
    commands = readme_commands()
    assert commands, "no shell block found in README.md"
    for args in commands:
        command = shlex.join(args)
        covered = (
            args[0] == "snakemake"
            or args[:2] == ["psp", "embed"]
            or command == "make run"
            or command in COVERED_ELSEWHERE
        )
        assert covered, f"README command {command!r} is neither run nor dry-run by a test"


def dry_run(args: list[str], workdir: Path) -> str:
    """Snakemake with ``args`` from the repository root, as a user types it, plus ``-n``; the
    working directory is ``workdir``, so results/ of an earlier run cannot shorten the DAG.

    A dry run needs no cores, a real run does: Snakemake 9 refuses one without ``--cores``
    unless a profile sets the executor, so a command without either would fail for the user."""
    assert "--cores" in args or "--profile" in args, f"{shlex.join(args)}: no --cores"
    cmd = [sys.executable, "-m", "snakemake", *args, "-n", "--directory", str(workdir)]
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{shlex.join(cmd)} failed:\n{out[-6000:]}"
    assert "Nothing to be done" not in out
    return out


def localised(args: list[str], request, scratch: Path) -> list[str]:
    """``args`` with the pages' mirror paths replaced by the tests' mirror (skipping without
    one) and a storage prefix by a scratch one that holds the mirror as ``data/``."""
    text = shlex.join(args)
    if not any(path in text for path in (*PAGE_MIRRORS, PAGE_STORAGE)):
        return args
    mirror = request.getfixturevalue("shared_data")
    if PAGE_STORAGE in text:
        pytest.importorskip("snakemake_storage_plugin_fs")
        (scratch / "storage").mkdir()
        (scratch / "storage" / "data").symlink_to(mirror)
        text = text.replace(PAGE_STORAGE, str(scratch / "storage"))
    for path in PAGE_MIRRORS:
        text = text.replace(path, str(mirror))
    return shlex.split(text)


@pytest.fixture(scope="module")
def paper_dag(tmp_path_factory) -> str:
    """The dry run of the README's paper command, exactly as written."""
    return dry_run(shlex.split(paper_command())[1:], tmp_path_factory.mktemp("paper"))


@pytest.mark.parametrize("command", snakemake_commands([README, *DOCS]))
def test_snakemake_command_of_the_pages_dry_runs(command, request, tmp_path):
    if command == paper_command():
        request.getfixturevalue("paper_dag")  # checked in full below
        return
    workdir = tmp_path / "work"
    workdir.mkdir()
    dry_run(localised(shlex.split(command)[1:], request, tmp_path), workdir)


def test_make_run_is_the_command_the_readme_says(request, tmp_path):
    """``make run``'s Snakemake line is the one the README's comment gives, and it dry-runs."""
    (line,) = [line for line in shell_lines() if line.startswith("make run")]
    said = line.split("then: ", 1)[1]
    recipe = subprocess.run(
        ["make", "-n", "run"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    (run,) = [shlex.split(line) for line in recipe.splitlines() if "snakemake " in line]
    assert shlex.join([Path(run[0]).name, *run[1:]]) == said
    dry_run(localised(run[1:], request, tmp_path), tmp_path)


def test_readme_psp_embed_runs(tiny_model, tmp_path):
    (args,) = [args for args in readme_commands() if args[:2] == ["psp", "embed"]]
    model_dir = tmp_path / args[args.index("--model") + 1]
    model_dir.parent.mkdir(parents=True)
    model_dir.symlink_to(tiny_model)
    sentences = ["The cat is asleep.", "El gato duerme.", "A third line."]
    (tmp_path / args[args.index("--input") + 1]).write_text("\n".join(sentences) + "\n")
    psp_bin = Path(sys.executable).parent / "psp"
    subprocess.run([str(psp_bin), *args[1:]], cwd=tmp_path, check=True, capture_output=True)
    rows = np.load(tmp_path / args[args.index("--output") + 1])
    np.testing.assert_allclose(rows, psp.load(tiny_model).embed(sentences), rtol=1e-5)


# ---- the paper's reproduction --------------------------------------------------------------

PAPER_MODELS = ["en", *(f"{lang}-en" for lang in ("ar", "de", "es", "fr", "ru", "tr", "zh"))]
#: The paper's training recipe (configs/paper.yaml's header), for every model.
PAPER_TRAIN = {
    "dim": 1024,
    "batch_size": 128,
    "margin": 0.4,
    "megabatch_size": 100,
    "anneal": 150,
    "epochs": 25,
}
#: ParaNMT-50M as filtered in the paper: paraphrase score >= 0.4, trigram overlap <= 0.7,
#: mean length 5-40 tokens, language identification.
PARANMT_FILTERS = {
    "length_side": "mean",
    "min_tokens": 5,
    "max_tokens": 40,
    "langid": True,
    "max_trigram_overlap": 0.7,
    "min_score": 0.4,
}
BITEXT_FILTERS = {"length_side": "tgt", "min_tokens": 3, "max_tokens": 100, "langid": True}
#: Sets of config.yaml and the data mirror; none may reach the paper's DAG.
MIRROR_ONLY = ("parasci", "flickr30k", "wmt-newstest", "quijote", "tico19", "ntrex128", "multi30k")


def paper_config() -> dict:
    """configs/paper.yaml as the README's command names it."""
    args = shlex.split(paper_command())
    return yaml.safe_load((REPO / args[args.index("--configfile") + 1]).read_text())


def test_readme_paper_command_is_the_slurm_run_of_paper_yaml():
    args = shlex.split(paper_command())
    assert args[args.index("--profile") + 1] == "profiles/slurm"
    assert args[args.index("--configfile") + 1] == "configs/paper.yaml"
    assert "all" in args[: args.index("--configfile")]  # not read as a second config file


def test_paper_config_is_the_papers_recipe():
    """What the paper DAG trains: config.yaml is not loaded under paper.yaml (the DAG test
    below shows none of its sets), so these keys and the schema's defaults are the whole run."""
    config = paper_config()
    assert config["mirror"] is None
    assert sorted(config["models"]) == sorted(PAPER_MODELS)
    for name, entry in config["models"].items():
        assert {k: entry["train"][k] for k in PAPER_TRAIN} == PAPER_TRAIN, name
        assert entry["spm"]["vocab_size"] == 50_000, name
        filters = PARANMT_FILTERS if name == "en" else BITEXT_FILTERS
        assert entry["filters"] == filters, name
    assert config["models"]["en"]["corpora"] == ["paraphrase/paranmt/para-nmt-50m"]


def test_readme_paper_command_builds_the_complete_dag(paper_dag):
    config, counts = paper_config(), job_counts(paper_dag)
    n = len(PAPER_MODELS)
    for rule in ("filter_pairs", "train_sentencepiece", "encode_hdf5", "train_model"):
        assert counts[rule] == n, rule
    for rule in ("evaluate_model", "evaluate_untrained", "model_card", "untrained_model_card"):
        assert counts[rule] == n, rule
    assert counts["speed"] == counts["report"] == counts["all"] == 1
    for model in PAPER_MODELS:
        assert f"results/models/{model}/embeddings.safetensors" in paper_dag
        assert f"results/eval/{model}/metrics.json" in paper_dag
    # every set downloads from upstream, and none of the data mirror's sets is planned
    assert "results/sources/.manifests/paraphrase/paranmt/para-nmt-50m.json" in paper_dag
    for source in ("sts/en", "sts/stsb", "sts/sts17", "tatoeba"):  # every evaluation's data
        assert f"results/sources/.manifests/{source}.json" in paper_dag
    for lang in ("ar", "de", "es", "fr", "ru", "tr", "zh"):
        assert f"results/sources/.manifests/bitext/{lang}-en/OpenSubtitles2018.json" in paper_dag
    assert "bitext/es-en/Europarl" in paper_dag and "bitext/ar-en/Europarl" not in paper_dag
    assert "bitext/zh-en/MultiUN" in paper_dag and "bitext/es-en/MultiUN" not in paper_dag
    for name in MIRROR_ONLY:
        assert name not in paper_dag.lower(), name
    # mining and its evaluation: one reduce per mined pair, one BUCC job per evaluated pair,
    # and an evaluated pair mines at its dev optimum (threshold: auto)
    assert counts.get("score_mined", 0) == len(config["mining"])
    assert counts.get("evaluate_bucc", 0) == len(config["bucc"])
    for pair, entry in config["mining"].items():
        assert f"results/mine/{entry['model']}/{pair}.stats.json" in paper_dag
        if pair in config["bucc"] and entry.get("threshold", "auto") == "auto":
            assert f"results/bucc/{pair}/bucc.json" in paper_dag
    for pair in ("es-en", "ar-en", "tr-en"):  # no benchmark with gold; the reason is in the config
        assert pair not in config["mining"]
