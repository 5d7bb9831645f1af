"""Write faults: a full disk, a file size limit, a read-only folder, a folder without permission
and a folder that cannot be created, each made real by the kernel (a filled tmpfs, RLIMIT_FSIZE,
a read-only bind mount, mode 0555 for a root without its privileges; see ``tests/faults.py``).

Every command and a rule script must end with one line naming the path and the reason, a
non-zero exit status, no partial output and no temporaries.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from .faults import (
    FULL,
    NO_PERMISSION,
    PSP,
    READ_ONLY,
    SIZE_LIMIT,
    SIZE_LIMIT_BYTES,
    psp_refused,
    run_psp,
    run_refused,
)
from .fileserver import serve
from .test_convert import checkpoint  # noqa: F401 - fixture
from .test_faults_download import URL_PATH, upstream  # noqa: F401 - fixture
from .test_faults_train import SETTINGS, training_data  # noqa: F401 - fixture
from .workflow.conftest import mirror_slice  # noqa: F401 - fixture

REASON = {
    FULL: "No space left on device",
    SIZE_LIMIT: f"File too large (this process may write files of at most {SIZE_LIMIT_BYTES} "
    "bytes: ulimit -f)",
    READ_ONLY: "Read-only file system",
    NO_PERMISSION: "Permission denied",
}


@pytest.fixture(scope="module")
def inputs(news, tmp_path_factory) -> Path:
    """3,000 real sentences and 2,999 pairs of them: every output is well over the limits."""
    root = tmp_path_factory.mktemp("inputs")
    (root / "sents.txt").write_text("".join(f"{line}\n" for line in news))
    (root / "pairs.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in zip(news, news[1:])))
    return root


def said(proc, command: str) -> str:
    """The last line the command printed, after checking it failed without a traceback."""
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip().splitlines()[-1].removeprefix(f"psp {command}: error: ")


@pytest.mark.parametrize("fault", [FULL, SIZE_LIMIT, READ_ONLY, NO_PERMISSION])
@pytest.mark.parametrize(
    ("command", "text", "name"),
    [("embed", "sents.txt", "embs.npy"), ("score", "pairs.tsv", "s.tsv")],
)
def test_embed_and_score(fault, command, text, name, tiny_model, inputs, tmp_path):
    out = tmp_path / "out" / name
    argv = [command, "--model", tiny_model, "--input", inputs / text, "--output", out]
    proc, left = psp_refused(fault, out.parent, *argv)
    assert said(proc, command) == f"{out}: cannot write: {REASON[fault]}"
    assert left == []


@pytest.mark.parametrize("fault", [READ_ONLY, NO_PERMISSION])
def test_embed_into_a_folder_that_cannot_be_created(fault, tiny_model, inputs, tmp_path):
    out = tmp_path / "out" / "missing" / "embs.npy"
    argv = ["embed", "--model", tiny_model, "--input", inputs / "sents.txt", "--output", out]
    proc, left = psp_refused(fault, out.parent.parent, *argv)
    assert said(proc, "embed") == f"{out}: cannot create folder {out.parent}: {REASON[fault]}"
    assert left == []


def test_embed_into_a_folder_below_a_file(tiny_model, inputs, tmp_path):
    (tmp_path / "file").write_text("not a folder\n")
    out = tmp_path / "file" / "sub" / "embs.npy"
    argv = ["embed", "--model", tiny_model, "--input", inputs / "sents.txt", "--output", out]
    proc = run_psp(*argv)
    assert said(proc, "embed") == f"{out}: cannot create folder {out.parent}: Not a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_score_to_a_full_standard_output(tiny_model, inputs, tmp_path):
    """``> file`` on a full disk: the shell opened the file, so psp can only give the reason."""
    folder = tmp_path / "out"
    argv = ["sh", "-c", 'out=$1; shift; exec "$@" > "$out"', "sh", folder / "scored.tsv", PSP]
    argv += ["score", "--model", tiny_model, "--input", inputs / "pairs.tsv", "--output", "-"]
    proc, left = run_refused(FULL, folder, argv)
    assert said(proc, "score") == f"cannot write: {REASON[FULL]}"
    assert left == ["scored.tsv"]  # the shell's file, empty


@pytest.mark.parametrize("fault", [FULL, READ_ONLY])
def test_mine(fault, tiny_model, inputs, tmp_path):
    out = tmp_path / "out" / "mined.tsv.gz"
    argv = ["mine", "--model", tiny_model, "--output", out]
    argv += ["--src-file", inputs / "sents.txt", "--tgt-file", inputs / "sents.txt"]
    proc, left = psp_refused(fault, out.parent, *argv)
    work = out.with_name(out.name + ".work")
    if fault == FULL:
        assert said(proc, "mine") == f"{work}/manifest.json: cannot write: {REASON[fault]}"
        # The work dir is kept after any failure but bad input, for the rerun to resume.
        assert left == [work.name, f"{work.name}/.lock"]
    else:
        assert said(proc, "mine") == f"{work}: {REASON[fault]}"
        assert left == []


@pytest.mark.parametrize("fault", [FULL, SIZE_LIMIT])
def test_train(fault, training_data, tmp_path):  # noqa: F811
    folder = tmp_path / "out"
    argv = ["train", *training_data, *SETTINGS]
    argv += ["--model-dir", folder / "model", "--work-dir", folder / "work"]
    proc, left = psp_refused(fault, folder, *argv)
    message = said(proc, "train")
    # The first file written is the first checkpoint (safetensors, which removes a partial file
    # itself and names the reason only in its own words).
    assert re.fullmatch(
        f"{folder}/work/checkpoints/state-[0-9]+.safetensors: cannot write: {re.escape(REASON[fault])}",
        message,
    ), message
    assert "model" not in left
    assert [path for path in left if "/." in path] == []


@pytest.mark.parametrize("fault", [FULL, READ_ONLY])
def test_eval(fault, tiny_model, shared_data, tmp_path):
    folder = tmp_path / "out"
    argv = ["eval", "--embedder", f"tiny=psp:{tiny_model}", "--data", shared_data]
    argv += ["--out", folder / "eval", "--no-sts", "--sts17", "en-en", "--tatoeba", "es"]
    proc, left = psp_refused(fault, folder, *argv)
    message = said(proc, "eval")
    if fault == FULL:
        assert message == f"{folder}/eval/tiny/sts17.csv: cannot write: {REASON[fault]}"
        assert left == ["eval", "eval/tiny"]
    else:
        assert message == f"{folder}/eval: {REASON[fault]}"
        assert left == []


@pytest.mark.parametrize("fault", [FULL, NO_PERMISSION])
def test_convert_original(fault, checkpoint, spm_path, tmp_path):  # noqa: F811
    folder = tmp_path / "out"
    argv = ["convert-original", checkpoint[0], spm_path, folder / "model"]
    proc, left = psp_refused(fault, folder, *argv)
    message = said(proc, "convert-original")
    if fault == FULL:
        assert message == f"{folder}/model/embeddings.safetensors: cannot write: {REASON[fault]}"
        assert left == ["model"]
    else:
        assert message == f"{folder}/model: {REASON[fault]}"
        assert left == []


def test_data_import(upstream, tmp_path):  # noqa: F811
    archive = tmp_path / "Stsbenchmark.tar.gz"
    archive.write_bytes(upstream)
    folder = tmp_path / "data"
    proc, left = psp_refused(FULL, folder, "data", "import", "sts/stsb", archive, "--out", folder)
    assert said(proc, "data") == f"{folder}/sts/stsb/train.tsv: cannot write: {REASON[FULL]}"
    assert left == ["sts", "sts/stsb"]


# The registry, pointed at the test server, then the real command (the server is this process's).
_DOWNLOAD = """import sys
from dataclasses import replace
from psp.cli import main
from psp.data.sources import SOURCES
SOURCES["sts/stsb"] = replace(SOURCES["sts/stsb"], url=sys.argv[1])
sys.exit(main(sys.argv[2:]))
"""


def test_data_download_keeps_its_part_for_a_rerun(upstream, tmp_path):  # noqa: F811
    """A refused write is final, not a dropped connection to retry; the ``.part`` stays (empty
    here) so that a rerun with room resumes, as after a kill."""
    folder = tmp_path / "dl"
    for server in serve():
        server.state.files[URL_PATH] = upstream
        argv = [sys.executable, "-c", _DOWNLOAD, server.base + URL_PATH, "data", "download"]
        argv += ["sts/stsb", "--out", tmp_path / "data", "--downloads", folder]
        proc, left = run_refused(FULL, folder, [*argv, "--retries", "3", "--timeout", "5"])
        part = folder / "sts/stsb/Stsbenchmark.tar.gz.part"
        assert said(proc, "data") == f"{part}: cannot write: {REASON[FULL]}"
        assert "retrying" not in proc.stderr
        assert left == ["sts", "sts/stsb", "sts/stsb/Stsbenchmark.tar.gz.part"]
        assert not (tmp_path / "data").exists()


def test_a_rule_script_ends_with_one_line_in_its_log(mirror_slice, tmp_path):  # noqa: F811
    """``filter_pairs`` writing into a full folder: the job fails, its log ends with the line."""
    folder = tmp_path / "results" / "data" / "es-en"
    snakemake = [sys.executable, "-m", "snakemake", "-s", Path(__file__).parents[1] / "Snakefile"]
    snakemake += ["--directory", tmp_path, "--cores", "1", "results/data/es-en/pairs.tsv.gz"]
    proc, left = run_refused(FULL, folder, [*snakemake, "--config", f"mirror={mirror_slice}"])
    assert proc.returncode == 1
    line = (
        f"rule filter_pairs: error: results/data/es-en/pairs.tsv.gz: cannot write: {REASON[FULL]}"
    )
    log = (tmp_path / "results/logs/filter_pairs/es-en.log").read_text()
    assert log.strip().splitlines()[-1] == line
    assert "Traceback" not in log
    assert line in proc.stderr
    assert left == []
