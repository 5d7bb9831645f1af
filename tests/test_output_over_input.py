"""No command writes over its own input: each ``psp`` command, given an output that is one of its
inputs (the same path, a symbolic link to it or a hard link of it), stops with one line naming
both before it reads or writes anything, and the input is left byte for byte as it was; so does
a workflow job, and the workflow refuses a config input that is one of its outputs."""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path

import pytest

from psp.cli import COMMANDS, build_parser, main
from psp.io import FileRoles, InputError

LINKS = ("same path", "symlink", "hard link")


def aliased(target: Path, folder: Path, how: str) -> Path:
    """A path to ``target``: itself, a symbolic link to it, or a hard link of it, in ``folder``."""
    if how == "same path":
        return target
    folder.mkdir(parents=True, exist_ok=True)
    alias = folder / f"alias-{target.name}"
    if how == "symlink":
        alias.symlink_to(target)
    else:
        os.link(target, alias)
    return alias


def refused(argv: list, kept: Path, capsys, *named: Path) -> None:
    """``psp ARGV`` stops with status 2 and one line naming ``named``, ``kept`` untouched."""
    before = kept.read_bytes()
    assert main([str(arg) for arg in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "would destroy that input" in err, err
    assert all(str(path) in err for path in named), err
    assert kept.read_bytes() == before


@pytest.fixture()
def text(news, tmp_path) -> Path:
    path = tmp_path / "sents.txt"
    path.write_text("".join(f"{line}\n" for line in news[:20]), encoding="utf-8")
    return path


@pytest.mark.parametrize("how", LINKS)
def test_embed_refuses_to_write_over_its_input(tiny_model, text, tmp_path, capsys, how):
    out = aliased(text, tmp_path / "out", how)
    argv = ["embed", "--model", tiny_model, "--input", text, "--output", out]
    refused(argv, text, capsys, out, text)


@pytest.mark.parametrize("how", LINKS)
def test_score_refuses_to_write_over_its_input(tiny_model, news, tmp_path, capsys, how):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in zip(news[:9], news[9:18])), "utf-8")
    out = aliased(pairs, tmp_path / "out", how)
    argv = ["score", "--model", tiny_model, "--input", pairs, "--output", out]
    refused(argv, pairs, capsys, out, pairs)


def test_embed_refuses_to_write_over_the_model(tiny_model, text, capsys):
    weights = Path(tiny_model) / "embeddings.safetensors"
    argv = ["embed", "--model", tiny_model, "--input", text, "--output", weights]
    refused(argv, weights, capsys, weights)


def test_standard_input_and_output_name_no_file(tiny_model, news, tmp_path):
    """``-`` on both sides is stdin and stdout, never a file named ``-``."""
    roles = FileRoles(outputs={"--output": "-"}, inputs={"--input": "-"})
    roles.check()


@pytest.mark.parametrize("how", LINKS)
def test_mine_refuses_to_write_over_a_corpus(tiny_model, text, news, tmp_path, capsys, how):
    tgt = tmp_path / "en.txt"
    tgt.write_text("".join(f"{line}\n" for line in news[30:50]), encoding="utf-8")
    out = aliased(text, tmp_path / "out", how)
    argv = ["mine", "--model", tiny_model, "--src-file", text, "--tgt-file", tgt, "--output", out]
    refused(argv, text, capsys, out, text)
    assert not Path(f"{out}.work").exists()


def test_mine_refuses_stats_over_a_corpus(tiny_model, news, tmp_path, capsys):
    """The stats file is named after the output: an input by that name would be replaced."""
    src = tmp_path / "mined.stats.json"
    src.write_text("".join(f"{line}\n" for line in news[:20]), encoding="utf-8")
    argv = ["mine", "--model", tiny_model, "--src-file", src, "--tgt-file", src]
    refused([*argv, "--output", tmp_path / "mined.tsv.gz"], src, capsys, src)


def test_mine_refuses_a_corpus_inside_its_own_work_dir(tiny_model, news, tmp_path, capsys):
    work = tmp_path / "mined.tsv.gz.work"
    work.mkdir()
    src = work / "es.txt"
    src.write_text("".join(f"{line}\n" for line in news[:20]), encoding="utf-8")
    before = src.read_bytes()
    argv = ["mine", "--model", tiny_model, "--src-file", src, "--tgt-file", src]
    assert main([str(arg) for arg in [*argv, "--output", tmp_path / "mined.tsv.gz"]]) == 2
    err = capsys.readouterr().err
    assert f"{src} (--src-file) lies in {work}" in err and "removed when the run ends" in err
    assert src.read_bytes() == before


def test_convert_refuses_to_write_over_its_spm_model(spm_path, tmp_path, capsys):
    out_dir = tmp_path / "model"
    out_dir.mkdir()
    spm = shutil.copy(spm_path, out_dir / "sentencepiece.model")
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"not read: the check comes first")
    refused(["convert-original", checkpoint, spm, out_dir], Path(spm), capsys, spm)


def test_export_refuses_to_write_over_the_model(tiny_model, capsys):
    """model2vec's directory has a config.json: exported into the model it would replace it."""
    config = Path(tiny_model) / "config.json"
    argv = ["export", "--model", tiny_model, "--to", "model2vec", tiny_model]
    refused(argv, config, capsys, config)


def test_train_refuses_a_model_dir_holding_its_spm(spm_path, tmp_path, capsys):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    spm = Path(shutil.copy(spm_path, model_dir / "sentencepiece.model"))
    h5 = tmp_path / "pairs.h5"
    h5.write_bytes(b"not read: the check comes first")
    argv = ["train", "--h5", h5, "--spm", spm, "--model-dir", model_dir]
    refused([*argv, "--work-dir", tmp_path / "work", "--no-eval"], spm, capsys, spm)


def test_eval_refuses_to_write_over_the_floor(tiny_model, shared_data, tmp_path, capsys):
    floor = tmp_path / "eval" / "untrained"
    floor.mkdir(parents=True)
    metrics = floor / "metrics.json"
    metrics.write_text('{"name": "untrained", "metrics": {}}\n')
    argv = ["eval", "--embedder", f"untrained=psp:{tiny_model}", "--data", shared_data]
    argv += ["--out", tmp_path / "eval", "--floor", floor, "--tatoeba", "es"]
    refused(argv, metrics, capsys, metrics)


def test_speed_refuses_a_table_linked_to_its_news(tiny_model, shared_data, tmp_path, capsys):
    from psp.evaluate.speed import NEWS_FILES

    out = tmp_path / "speed"
    news = aliased(shared_data / NEWS_FILES[0], out, "symlink")
    news.rename(out / "speed.csv")
    argv = ["speed", "--data", shared_data, "--model", tiny_model, "--out", out]
    refused(argv, shared_data / NEWS_FILES[0], capsys, out / "speed.csv")


def test_data_import_refuses_to_write_over_a_downloaded_file(tmp_path, capsys):
    from psp.data.sources import SOURCES

    source = SOURCES["sts/sts17"]
    out = tmp_path / "mirror"
    target = out / source.outputs[0]
    target.parent.mkdir(parents=True)
    target.write_text("the downloaded file, kept where the import writes\n")
    argv = ["data", "import", source.id, target, "--out", out]
    refused(argv, target, capsys, target)


def test_data_download_refuses_a_download_that_is_an_output(tmp_path, capsys):
    """A download folder hard-linked into the data root: the import would replace the file it
    reads (checked before any request)."""
    from psp.data.sources import SOURCES

    source = SOURCES["sts/sts17"]
    downloads, out = tmp_path / "downloads", tmp_path / "mirror"
    download = downloads / source.id / source.filename(source.urls[0])
    download.parent.mkdir(parents=True)
    download.write_bytes(b"a finished download")
    imported = out / source.outputs[0]
    imported.parent.mkdir(parents=True)
    os.link(download, imported)
    argv = ["data", "download", source.id, "--out", out, "--downloads", downloads]
    refused(argv, download, capsys, imported, download)


def test_every_command_that_writes_files_declares_them():
    """Each command (and each ``psp data`` subcommand that writes) sets ``file_roles``, so
    ``psp``'s main checks it before the command runs; ``psp data list`` writes nothing."""
    writes_nothing = {"data list"}
    for module in COMMANDS:
        name = importlib.import_module(f"psp.cli.{module}").NAME
        (sub,) = [a for a in build_parser(name)._actions if a.dest == "command"]
        choice = sub.choices[name]
        nested = [a for a in choice._actions if a.dest == "data_command"]
        parsers = nested[0].choices.items() if nested else [(None, choice)]
        for sub_name, sub_parser in parsers:
            label = f"{name} {sub_name}" if sub_name else name
            declared = sub_parser.get_default("file_roles") is not None
            assert declared != (label in writes_nothing), label


def test_file_roles_name_both_files_of_a_hard_link(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("precious\n")
    link = aliased(data, tmp_path / "elsewhere", "hard link")
    with pytest.raises(InputError, match=rf"^{link} \(--out\) is the input {data} \(--in\), "):
        FileRoles(outputs={"--out": link}, inputs={"--in": data}).check()
    FileRoles(outputs={"--out": tmp_path / "new.txt"}, inputs={"--in": data}).check()


def test_a_workflow_job_refuses_an_output_that_is_its_input(tmp_path):
    """What every workflow script checks first (``psp.workflow.runtime.setup``), on Snakemake's
    own file lists."""
    from types import SimpleNamespace

    from snakemake.iocontainers import InputFiles, Log, OutputFiles

    from psp.workflow.runtime import job_roles

    data = tmp_path / "corpus.txt"
    data.write_text("precious\n")
    link = aliased(data, tmp_path / "results", "symlink")
    inputs = InputFiles(fromdict={"text": str(data), "plan": str(tmp_path / "plan.json")})
    job = SimpleNamespace(input=inputs, output=OutputFiles([str(link)]), log=Log([]))
    with pytest.raises(InputError, match=r"\(output\[0\]\) is the input .* \(input.text\)"):
        job_roles(job).check()
    job.output = OutputFiles([str(tmp_path / "results" / "other.txt")])
    job_roles(job).check()
