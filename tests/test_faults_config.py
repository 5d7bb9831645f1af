"""Workflow configuration faults: each stops Snakemake before any job runs, naming the problem."""

from __future__ import annotations

import yaml

from .workflow.conftest import REPO, run_snakemake


def test_default_config_without_a_mirror_stops_naming_the_sets_and_the_fix(tmp_path):
    proc = run_snakemake(["all", "-n"], tmp_path, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "exists only in a data mirror" in out and "--config mirror=DIR" in out
    for key, ref in [
        ("models.en.corpora", "paraphrase/parasci/acl-train"),
        ("mining.es-en.src", "mono/comparable-quijote/quijote.es"),
        ("bucc.es-en.test", "bitext/es-en/ntrex128"),
    ]:
        assert f"{key}: {ref}" in out
    assert "Job stats" not in out  # no job was planned, let alone run
    assert not (tmp_path / "results").exists()


def test_config_typo_and_wrong_type_are_named_by_the_schema(tmp_path):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["models"]["es-en"]["train"]["epoch"] = 3
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump(config))
    proc = run_snakemake(
        ["all", "-n", "--configfile", str(tmp_path / "typo.yaml")], tmp_path, check=False
    )
    assert proc.returncode != 0 and "'epoch' was unexpected" in proc.stdout + proc.stderr
    del config["models"]["es-en"]["train"]["epoch"]
    config["mining"]["es-en"]["k"] = "four"
    (tmp_path / "type.yaml").write_text(yaml.safe_dump(config))
    proc = run_snakemake(
        ["all", "-n", "--configfile", str(tmp_path / "type.yaml")], tmp_path, check=False
    )
    assert proc.returncode != 0 and "'four' is not of type 'integer'" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()
