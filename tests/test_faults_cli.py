"""Option faults: every numeric value is range-checked and every input checked before any work
starts, with argparse's usage error naming the option; a reader that goes away ends the command
quietly, as it ends any Unix tool."""

from __future__ import annotations

import subprocess

import pytest

from psp.cli import main

from .faults import PSP


@pytest.fixture(scope="module")
def inputs(news, tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    (root / "sents.txt").write_text("".join(f"{line}\n" for line in news[:20]))
    (root / "pairs.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in zip(news, news[1:])))
    return root


@pytest.mark.parametrize(
    ("command", "option", "value", "says"),
    [
        ("train", "--lr", "-1", "expected a finite number > 0, got '-1'"),
        ("train", "--dim", "0", "expected a whole number >= 1, got '0'"),
        ("train", "--dropout", "1.5", "expected a number in [0, 1), got '1.5'"),
        ("embed", "--batch-size", "0", "expected a whole number >= 1, got '0'"),
        ("embed", "--threads", "-1", "expected a whole number >= 1, got '-1'"),
        ("score", "--batch-size", "many", "expected a whole number >= 1, got 'many'"),
        ("mine", "--threshold", "nan", "expected a number (not NaN) or none, got 'nan'"),
        ("mine", "--k", "0", "expected a whole number >= 1, got '0'"),
        ("mine", "--shards", "-2", "expected a whole number >= 1, got '-2'"),
    ],
)
def test_out_of_range_values_are_usage_errors(
    command, option, value, says, tiny_model, inputs, tmp_path, capsys
):
    out = tmp_path / "out"
    files = {
        "train": ["--h5", inputs / "sents.txt", "--spm", inputs / "sents.txt"],
        "embed": ["--model", tiny_model, "--input", inputs / "sents.txt", "--output", out],
        "score": ["--model", tiny_model, "--input", inputs / "pairs.tsv", "--output", out],
        "mine": ["--model", tiny_model, "--output", out]
        + ["--src-file", inputs / "sents.txt", "--tgt-file", inputs / "sents.txt"],
    }[command]
    if command == "train":
        files += ["--model-dir", out, "--work-dir", tmp_path / "work"]
    with pytest.raises(SystemExit) as exit_:
        main([command, *map(str, files), f"{option}={value}"])
    assert exit_.value.code == 2
    assert f"psp {command}: error: argument {option}: {says}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "says"), [("missing.txt", "no such file"), ("", "is a directory, not a file")]
)
def test_a_missing_or_directory_input_is_named_before_the_model_loads(
    name, says, tiny_model, tmp_path, capsys
):
    bad = tmp_path / name
    out = tmp_path / "out.npy"
    argv = ["embed", "--model", str(tiny_model), "--input", str(bad), "--output", str(out)]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert f"argument --input: {str(bad).rstrip('/')}: {says}" in capsys.readouterr().err
    assert not out.exists()


def test_a_reader_that_goes_away_ends_psp_score_quietly(tiny_model, inputs):
    pipeline = (
        f"'{PSP}' score --model '{tiny_model}' --input '{inputs}/pairs.tsv' --output - | head -1"
    )
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipeline], capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.count("\n") == 1
    assert proc.returncode == 141  # killed by SIGPIPE, as cat ... | head -1 reports
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_a_malformed_sts_line_is_named_by_file_and_line(tiny_model, shared_data, tmp_path, capsys):
    rows = (shared_data / "sts/sts17/en-en.tsv").read_text().splitlines()[:30]
    rows[6] = rows[6].replace("\t", " ", 1)  # score and first sentence run together
    sts17 = tmp_path / "data/sts/sts17/en-en.tsv"
    sts17.parent.mkdir(parents=True)
    sts17.write_text("".join(f"{row}\n" for row in rows))
    out = tmp_path / "eval"
    argv = ["eval", "--embedder", f"psp:{tiny_model}", "--data", str(tmp_path / "data")]
    argv += ["--out", str(out), "--no-sts", "--sts17", "en-en", "--tatoeba"]
    assert main(argv) == 2
    assert f"{sts17}:7: expected 3 tab-separated columns" in capsys.readouterr().err
    assert not out.exists()  # no table of a partial evaluation
