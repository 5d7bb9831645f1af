"""``psp embed`` and ``psp score`` on small files and on stdin/stdout."""

from __future__ import annotations

import gzip
import subprocess
import sys

import numpy as np
import pytest

from psp.cli import main, streaming
from psp.cli.embed import HEADER_BYTES
from psp.cli.streaming import iter_input_batches, overlapped
from psp.io import InputError
from psp.model.torch_model import PSPModel

DIM = 24
CLI = [sys.executable, "-c", "import sys; from psp.cli import main; sys.exit(main())"]


@pytest.fixture(scope="module")
def model_dir(spm_path, tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    return PSPModel.from_spm(spm_path, DIM, seed=1).save(root / "model")


@pytest.fixture(scope="module")
def model(model_dir):
    from psp import load

    return load(model_dir)


def test_embed_file_rows_in_order(model, model_dir, news, tmp_path):
    lines = news[:25] + ["", "Ünïcode ☃ line"]
    src = tmp_path / "sents.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "embs.npy"
    args = ["embed", "--model", str(model_dir), "--input", str(src), "--output", str(out)]
    assert main([*args, "--batch-size", "4", "--threads", "1"]) == 0
    embs = np.load(out)
    assert embs.shape == (len(lines), DIM) and embs.dtype == np.float32
    np.testing.assert_allclose(embs, model.embed(lines), rtol=1e-6)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

    assert main([*args, "--float16"]) == 0
    half = np.load(out)
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, model.embed(lines), atol=5e-3)


def test_embed_process_gives_the_library_bits(model, model_dir, news, tmp_path):
    """``psp embed`` and ``psp score`` run without torch and without a JIT (the numpy table and
    the package's compiled loops: neither torch's start-up nor numba's), check a valid model
    config without importing jsonschema, import no tqdm for a bar that cannot show (stderr is a
    pipe here), and give exactly what
    ``psp.load(dir).embed`` / ``.score`` give: every bit, over batches and pool threads, a
    sentence with no known piece (zero row) included."""
    lines = [*news[:700], "", "☃☃☃"]
    src, out = tmp_path / "sents.txt", tmp_path / "embs.npy"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = (
        "import sys; from psp.cli import main; code = main(sys.argv[1:]); "
        "assert 'torch' not in sys.modules, 'torch imported'; "
        "assert 'numba' not in sys.modules, 'numba imported'; "
        "assert 'jsonschema' not in sys.modules, 'jsonschema imported for a valid config'; "
        "assert 'tqdm' not in sys.modules, 'tqdm imported for a bar that cannot show'; "
        "sys.exit(code)"
    )
    io_args = ["--model", str(model_dir), "--input", str(src), "--output", str(out)]
    for threads in ("1", "3"):
        cmd = [sys.executable, "-c", code, "embed", *io_args, "--threads", threads]
        subprocess.run([*cmd, "--batch-size", "256"], check=True, capture_output=True)
        expected = model.embed(lines)
        assert (expected[-2:] == 0).all()
        np.testing.assert_array_equal(np.load(out), expected)

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(pairs_text(news, 300), encoding="utf-8")
    scored = tmp_path / "scored.tsv"
    cmd = [sys.executable, "-c", code, "score", "--model", str(model_dir)]
    subprocess.run(
        [*cmd, "--input", str(pairs), "--output", str(scored), "--threads", "1"],
        check=True,
        capture_output=True,
    )
    cosines = [row.rsplit("\t", 1)[1] for row in scored.read_text(encoding="utf-8").splitlines()]
    assert cosines == [f"{c:.6f}" for c in model.score(news[:300], news[300:600])]


def test_progress_bar_where_tqdm_would_draw_one(monkeypatch):
    """The stand-in replaces tqdm exactly where ``tqdm.auto(disable=None)`` would draw nothing."""
    import io

    from tqdm.auto import tqdm

    from psp.model import progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert isinstance(progress.progress(total=3), progress._NoBar)
    assert isinstance(progress.progress(total=3, disable=False, file=sys.stderr), tqdm)
    monkeypatch.setattr(sys, "stderr", Terminal())
    with progress.progress(total=3, unit="sent") as bar:
        assert isinstance(bar, tqdm)
        bar.update(3)
    assert "3/3" in sys.stderr.getvalue()
    assert isinstance(progress.progress(total=3, disable=True), progress._NoBar)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setitem(sys.modules, "ipykernel", object())  # a notebook: tqdm.auto's widget
    assert progress.bar_would_show(None)


def test_input_batches_across_read_blocks(tmp_path, monkeypatch):
    """Lines cut by the read-block boundary, CRLF endings, a last line without a newline and
    the numbering of every batch come out as a line-at-a-time reader gives them."""
    monkeypatch.setattr(streaming, "READ_BYTES", 7)
    lines = ["first line", "", "ünïcödé ☃ spans blocks", "x", "windows", "", "last"]
    src = tmp_path / "in.txt"
    src.write_bytes("\n".join(lines[:4]).encode() + b"\nwindows\r\n\r\nlast")
    batches = list(iter_input_batches(str(src), 3))
    assert [first for first, _ in batches] == [1, 4, 7]
    assert [line for _, batch in batches for line in batch] == lines
    assert max(len(batch) for _, batch in batches) == 3


def test_input_invalid_utf8_named_in_a_later_block(tmp_path, monkeypatch):
    monkeypatch.setattr(streaming, "READ_BYTES", 5)
    src = tmp_path / "in.txt"
    src.write_bytes(b"one\ntwo\nthree\nfo\xffur\nfive\n")
    with pytest.raises(InputError, match=r"in.txt:4: invalid UTF-8"):
        list(iter_input_batches(str(src), 2))


def test_input_truncated_gzip_is_named(tmp_path):
    src = tmp_path / "in.txt.gz"
    src.write_bytes(gzip.compress(b"".join(b"line %d\n" % i for i in range(10_000)))[:-40])
    with pytest.raises(InputError, match="in.txt.gz: corrupt or truncated compressed file"):
        list(iter_input_batches(str(src), 100))


def test_embed_gz_input_without_final_newline(model, model_dir, news, tmp_path):
    src = tmp_path / "sents.txt.gz"
    with gzip.open(src, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(news[:5]))
    out = tmp_path / "embs.npy"
    assert (
        main(["embed", "--model", str(model_dir), "--input", str(src), "--output", str(out)]) == 0
    )
    np.testing.assert_allclose(np.load(out), model.embed(news[:5]), rtol=1e-6)


def test_embed_stdin(model, model_dir, news, tmp_path):
    out = tmp_path / "embs.npy"
    text = "\n".join(news[:10]) + "\n"
    cmd = [*CLI, "embed", "--model", str(model_dir), "--input", "-", "--output", str(out)]
    subprocess.run(cmd, input=text.encode(), check=True, capture_output=True)
    np.testing.assert_allclose(np.load(out), model.embed(news[:10]), rtol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["embs.npy"]


def test_embed_invalid_utf8_names_line(model_dir, tmp_path, capsys):
    src = tmp_path / "bad.txt"
    src.write_bytes(b"fine\nbad \xff byte\n")
    out = tmp_path / "embs.npy"
    assert (
        main(["embed", "--model", str(model_dir), "--input", str(src), "--output", str(out)]) == 2
    )
    assert "bad.txt:2" in capsys.readouterr().err
    assert not out.exists()


def pairs_text(news: list[str], n: int) -> str:
    return "".join(f"{a}\t{b}\n" for a, b in zip(news[:n], news[n : 2 * n], strict=True))


def test_score_file(model, model_dir, news, tmp_path):
    src = tmp_path / "pairs.tsv"
    src.write_text(pairs_text(news, 12), encoding="utf-8")
    out = tmp_path / "scored.tsv"
    cmd = ["score", "--model", str(model_dir), "--input", str(src), "--output", str(out)]
    assert main([*cmd, "--batch-size", "5"]) == 0
    rows = out.read_text(encoding="utf-8").splitlines()
    assert len(rows) == 12
    inputs = src.read_text(encoding="utf-8").splitlines()
    assert [r.rsplit("\t", 1)[0] for r in rows] == inputs
    scores = np.array([float(r.rsplit("\t", 1)[1]) for r in rows])
    np.testing.assert_allclose(scores, model.score(news[:12], news[12:24]), atol=1e-6)


def test_score_stdin_stdout(model, model_dir, news):
    cmd = [*CLI, "score", "--model", str(model_dir), "--input", "-", "--output", "-"]
    done = subprocess.run(cmd, input=pairs_text(news, 3).encode(), check=True, capture_output=True)
    rows = done.stdout.decode().splitlines()
    scores = np.array([float(r.rsplit("\t", 1)[1]) for r in rows])
    np.testing.assert_allclose(scores, model.score(news[:3], news[3:6]), atol=1e-6)


def test_score_malformed_line_names_file_and_line(model_dir, news, tmp_path, capsys):
    src = tmp_path / "pairs.tsv"
    src.write_text(pairs_text(news, 2) + "only one field\n", encoding="utf-8")
    out = tmp_path / "scored.tsv"
    cmd = ["score", "--model", str(model_dir), "--input", str(src), "--output", str(out)]
    assert main(cmd) == 2
    assert f"{src}:3: expected 2 tab-separated fields, found 1" in capsys.readouterr().err
    assert not out.exists()


def test_score_malformed_stdin_line(model_dir):
    cmd = [*CLI, "score", "--model", str(model_dir), "--input", "-", "--output", "-"]
    done = subprocess.run(cmd, input=b"a\tb\na\tb\tc\n", capture_output=True)
    assert done.returncode == 2
    assert "<stdin>:2: expected 2 tab-separated fields, found 3" in done.stderr.decode()


def test_missing_model_is_clear_error(tmp_path, capsys):
    src = tmp_path / "s.txt"
    src.write_text("hello\n")
    args = ["embed", "--model", str(tmp_path / "nope"), "--input", str(src), "--output", "x.npy"]
    assert main(args) == 2
    assert "nope: model directory not found" in capsys.readouterr().err


def test_embed_output_larger_than_a_batch_and_empty_input(model, model_dir, news, tmp_path):
    """The header written before the row count is known is patched to the final count."""
    src = tmp_path / "sents.txt"
    src.write_text("\n".join(news[:1234]) + "\n", encoding="utf-8")
    out = tmp_path / "embs.npy"
    args = ["embed", "--model", str(model_dir), "--input", str(src), "--output", str(out)]
    assert main([*args, "--batch-size", "100"]) == 0
    mapped = np.load(out, mmap_mode="r")
    assert mapped.shape == (1234, DIM) and mapped.offset == HEADER_BYTES
    np.testing.assert_allclose(mapped, model.embed(news[:1234]), rtol=1e-6)

    src.write_text("", encoding="utf-8")
    assert main(args) == 0
    assert np.load(out).shape == (0, DIM)


def test_overlapped_runs_in_order_and_raises_either_side():
    seen = []
    overlapped(range(50), seen.append, depth=2)
    assert seen == list(range(50))

    def produce():
        yield 1
        raise InputError("bad line")

    with pytest.raises(InputError, match="bad line"):
        overlapped(produce(), lambda item: None)

    def consume(item):
        if item == 3:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        overlapped(range(1000), consume, depth=2)


def test_score_to_a_reader_that_stops_early_ends_quietly(model_dir, news, tmp_path):
    """``psp score ... | head -1``: no BrokenPipeError traceback, the status of SIGPIPE."""
    src = tmp_path / "pairs.tsv"
    src.write_text(pairs_text(news, 1500), encoding="utf-8")  # far more than a pipe holds
    cmd = [*CLI, "score", "--model", str(model_dir), "--input", str(src), "--output", "-"]
    proc = subprocess.Popen(
        [*cmd, "--batch-size", "50"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout.readline().count(b"\t") == 2
    proc.stdout.close()
    assert proc.wait(timeout=120) == 141
    assert b"Traceback" not in proc.stderr.read()


HEAVY = ("torch", "faiss", "numpy", "scipy", "matplotlib", "h5py", "sentencepiece", "tqdm")


def imported_modules(code: str) -> set[str]:
    """Top-level packages a fresh interpreter imports to run ``code`` (``-X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True
    )
    names = (line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line)
    return {name.split(".")[0] for name in names}


@pytest.mark.parametrize(
    "code",
    [
        "import psp",
        "import psp.cli",
        "from psp.cli import main; main(['--help'])",
        "from psp.cli import main; main(['embed', '--model'])",
        "from psp.cli import main; main(['score', '--help'])",
        "from psp.cli import main; main(['speed', '--help'])",
    ],
)
def test_cli_starts_without_heavy_imports(code):
    assert not imported_modules(code) & set(HEAVY), code
