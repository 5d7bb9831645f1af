"""Dry runs: the DAGs users ask for are complete, and bad configs fail with the key named."""

from __future__ import annotations

import re

import yaml

from .conftest import REPO, run_snakemake, write_config


def dry_run(workdir, target, *options) -> str:
    """Dry-run ``target``; options (``--config``, ``--configfile`` take several values) go last."""
    proc = run_snakemake([target, "-n", *options], workdir)
    return proc.stdout + proc.stderr


def job_counts(text: str) -> dict[str, int]:
    """Parse Snakemake's 'Job stats' table: rule name → job count."""
    counts = {}
    for line in text.splitlines():
        match = re.match(r"^\s*([A-Za-z_][\w]*)\s+(\d+)\s*$", line)
        if match:
            counts[match.group(1)] = int(match.group(2))
    return counts


def paper_dry_run(workdir, targets: list[str]) -> str:
    """Dry-run ``targets`` of configs/paper.yaml alone (config.yaml's mirror-only sets stay out)."""
    config = ["--configfile", str(REPO / "configs/paper.yaml"), "--replace-workflow-config"]
    proc = run_snakemake([*targets, "-n", *config], workdir)
    return proc.stdout + proc.stderr


def test_paper_config_mines_and_evaluates_bucc2018(tmp_path):
    """de, fr, ru and zh-en mine BUCC 2018's training split and are scored on it with the
    threshold of the sample split; both archives of each pair come from comparable.limsi.fr."""
    bucc = ["de", "fr", "ru", "zh"]
    targets = [f"results/bucc/{xx}-en/bucc.json" for xx in bucc]
    targets += [f"results/mine/{xx}-en/{xx}-en.tsv.gz" for xx in bucc]
    listing = paper_dry_run(tmp_path, targets)
    counts = job_counts(listing)
    assert counts["evaluate_bucc"] == counts["score_mined"] == 4
    assert counts["knn_shard_pair"] == 4 * 4 * 4
    for xx in bucc:
        assert counts[f"fetch_source_bucc2018_{xx}_en"] == 1
        assert f"results/sources/bucc2018/{xx}-en/{xx}-en.training.{xx}.txt.gz" in listing
        assert f"results/sources/bucc2018/{xx}-en/{xx}-en.sample.gold" in listing


def test_slurm_profile_splits_mining_into_shard_jobs(tmp_path, mirror_slice):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["mirror"] = str(mirror_slice)
    config["mining"]["es-en"]["shards"] = 40
    cfg = tmp_path / "big.yaml"
    cfg.write_text(yaml.safe_dump(config))
    out = dry_run(
        tmp_path, "mine_es_en", "--profile", str(REPO / "profiles/slurm"), "--configfile", str(cfg)
    )
    counts = job_counts(out)
    assert counts["mine_text"] == 2  # each side's text and shard plan, once
    assert counts["embed_shard"] == 2 * 40
    assert counts["train_index"] == 1  # one quantizer for the pair ...
    assert counts["index_shard"] == 2 * 40  # ... and one list assignment per shard, not per pair
    assert counts["knn_shard_pair"] == 40 * 40
    assert counts["score_mined"] == 1


def test_default_config_targets(tmp_path, mirror_slice):
    for target in ["prepare_es_en", "prepare_en", "train_es_en", "eval_en", "mine_es_en", "all"]:
        out = dry_run(tmp_path, target, "--config", f"mirror={mirror_slice}")
        assert "Nothing to be done" not in out


def test_compare_losses_is_opt_in(tmp_path, mirror_slice):
    mirror = f"mirror={mirror_slice}"
    assert "train_compare_losses" not in job_counts(dry_run(tmp_path, "all", "--config", mirror))
    proc = run_snakemake(["compare_losses", "-n", "--config", mirror], tmp_path, check=False)
    assert proc.returncode != 0
    assert "compare_losses.models is empty" in proc.stdout + proc.stderr
    overlay = str(REPO / "configs/compare_losses.yaml")
    out = dry_run(tmp_path, "compare_losses", "--configfile", overlay, "--config", mirror)
    counts = job_counts(out)
    assert counts["train_compare_losses"] == counts["evaluate_compare_losses"] == 3
    assert counts["evaluate_bucc_compare_losses"] == 2 and counts["train_model"] == 8  # no en
    assert "results/compare_losses/models/ar-en/embeddings.safetensors" in out
    assert "results/compare_losses/bucc/es-en/bucc.json" in out


def test_config_typo_is_named(tmp_path):
    cfg = write_config(tmp_path / "bad.yaml", REPO / "config.yaml", mirorr="x")
    proc = run_snakemake(["all", "-n", "--configfile", str(cfg)], tmp_path, check=False)
    assert proc.returncode != 0
    assert "mirorr" in proc.stderr + proc.stdout


def test_config_wrong_type_is_named(tmp_path):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["mining"]["es-en"]["shards"] = "two"
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump(config))
    proc = run_snakemake(["all", "-n", "--configfile", str(cfg)], tmp_path, check=False)
    assert proc.returncode != 0
    assert "shards" in proc.stderr + proc.stdout


def test_a_mining_input_linked_into_results_is_refused(tmp_path, mirror_slice):
    """Snakemake deletes a job's outputs before it runs the job: a local mining input that is a
    link to one (here the prepared source text) would be gone before it is read. The Snakefile
    refuses it when parsed, naming the key and the file, and the file is left as it was."""
    prepared = tmp_path / "results/mine/work/es-en/src.txt.gz"
    prepared.parent.mkdir(parents=True)
    prepared.write_bytes(b"the sentences someone wants to mine again")
    corpus = tmp_path / "corpus.es.txt.gz"
    corpus.symlink_to(prepared)
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["mirror"] = str(mirror_slice)
    config["mining"]["es-en"]["src"] = [str(corpus)]
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(config))
    proc = run_snakemake(["mine_es_en", "-n", "--configfile", str(cfg)], tmp_path, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"mining.es-en.src: {corpus} is {prepared.resolve()}, a file under results/" in out
    assert prepared.read_bytes() == b"the sentences someone wants to mine again"
