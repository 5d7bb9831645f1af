"""Raw text → embeddings, piece by piece and as a whole, against the static peers.

One run, on one model (a trained model directory with ``--model``, else a random table over a
SentencePiece model trained on the mirror's English bitext) and newstest-en repeated to
``--repeat`` copies (120k lines by default):

- **in process, 1 thread and all threads**: tokenisation (``PieceEncoder.encode`` with its word
  cache, cold and warm, and SentencePiece sentence by sentence), pooling alone
  (:func:`psp.model.pooling.mean_pool` into a reused buffer, against the scipy sparse product it
  replaced, run here: :func:`former_pool`, the same bits);
- **each encoder in a fresh process** (``psp.evaluate.worker``, Table 5's measurement: the thread
  count pinned, a second pass timed and the first kept, the memory the encoder costs beside its
  process's peak): our model into a fresh array (``psp:`` loads the torch-free
  :class:`psp.model.pooling.TableModel`, the vectors of ``PSPModel.embed``), and the same model
  exported with ``psp export`` and loaded by sentence-transformers (``StaticEmbedding``) and
  model2vec: the same vocabulary, table and lines;
- **``psp embed`` as a whole process** (start-up, reading, writing the ``.npy``), ``--threads 1``,
  on one line (its fixed cost) and at each ``--lines`` size, float32 and ``--float16``: its rate
  against the in-process one, and its peak RSS (flat in the number of lines);
- **the original recipe** (batches of 32, ``EncodeAsPieces``, a dict lookup per piece, padded
  ``nn.Embedding``, a length-masked mean) on ``--baseline-sentences``: the same vectors, and the
  ratio.

    python benchmarks/bench_embed.py [--model results/models/en] [--repeat 3]
        [--lines 120000 1200000] [--threads 2]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from psp.data.spm_training import train_spm
from psp.evaluate.timing import timed
from psp.evaluate.worker import run_worker
from psp.export import export_model
from psp.io import atomic_open
from psp.model.directory import read_model_dir
from psp.model.piece_encoder import PieceEncoder
from psp.model.pooling import mean_pool

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PSP_SHARED_DATA", REPO.parent / "shared" / "data"))
NEWS = DATA / "mono" / "en" / "wmt-newstest-en.txt.gz"
CLI = [sys.executable, "-c", "import sys; from psp.cli import main; sys.exit(main())"]
# Runs argv[2:] and writes "exit-status wall-seconds cpu-seconds peak-rss-KiB" to argv[1]. A
# child forked from this (large) process would report this process's peak RSS as its own: Linux
# keeps the high-water mark across exec. Forked from this small launcher, it reports its own.
LAUNCHER = """
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, use = os.wait4(pid, 0)
wall = time.perf_counter() - start
with open(sys.argv[1], "w") as out:
    print(os.waitstatus_to_exitcode(status), wall, use.ru_utime + use.ru_stime, use.ru_maxrss, file=out)
"""


def read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def random_model(tmp: Path, dim: int, vocab_size: int) -> Path:
    """A model directory: SentencePiece on the mirror's English bitext, a random table."""
    from psp.model.torch_model import PSPModel

    text = [line for path in sorted(DATA.glob("bitext/*-en/*.en.gz")) for line in read_gz(path)]
    spm = train_spm(text[:100_000], tmp / "en.model", vocab_size=vocab_size, num_threads=2)
    return PSPModel.from_spm(spm, dim, seed=0).save(tmp / "model")


def former_pool(table, ids, offsets, out) -> np.ndarray:
    """The pooling before the compiled loop: a sparse matrix of ones times the table, then a
    division by the piece counts (the same bits)."""
    from scipy.sparse import csr_matrix

    n = len(offsets) - 1
    counts = csr_matrix((np.ones(len(ids), np.float32), ids, offsets), shape=(n, len(table)))
    out[:n] = counts @ table
    np.divide(out[:n], np.maximum(np.diff(offsets), 1).astype(np.float32)[:, None], out=out[:n])
    return out


def original_embed(model_dir: Path, sentences: list[str], batch_size: int = 32) -> np.ndarray:
    """The original recipe, batch by batch (see the module docstring)."""
    import torch

    config, encoder, table = read_model_dir(model_dir)
    sp = encoder._sp
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    unk = config.unk_id
    del vocab[sp.id_to_piece(unk)]
    embedding = torch.nn.Embedding.from_pretrained(torch.from_numpy(table))
    out = []
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            rows = [
                [vocab[p] for p in sp.EncodeAsPieces(s.lower()) if p in vocab] or [unk]
                for s in sentences[start : start + batch_size]
            ]
            width = max(map(len, rows))
            padded = torch.zeros(len(rows), width, dtype=torch.int64)
            for i, ids in enumerate(rows):
                padded[i, : len(ids)] = torch.tensor(ids)
            lengths = torch.tensor([len(r) for r in rows])
            mask = torch.arange(width)[None, :] < lengths[:, None]
            out.append(((embedding(padded) * mask[:, :, None]).sum(1) / lengths[:, None]).numpy())
    return np.vstack(out)


def line(name: str, count: int, wall: float, cpu: float | None = None) -> float:
    cpu_part = "" if cpu is None else f", {count / cpu:9,.0f} per CPU-second"
    print(f"  {name:<46} {count / wall:9,.0f} sent/s wall{cpu_part}", flush=True)
    return count / wall


def in_process(model_dir: Path, sentences: list[str], threads: int) -> None:
    """Tokenisation and pooling alone, 1 thread and ``threads``."""
    _, encoder, table = read_model_dir(model_dir)
    n = len(sentences)
    for t in sorted({1, threads}):
        print(f"in process, {t} thread(s), {n:,} sentences:")
        cold = PieceEncoder(encoder.model_bytes)
        _, wall, cpu = timed(lambda: cold.encode(sentences, num_threads=t))
        line("tokenisation, word cache cold", n, wall, cpu)
        (ids, offsets), wall, cpu = timed(lambda: cold.encode(sentences, num_threads=t))
        line("tokenisation, word cache warm", n, wall, cpu)
        plain = PieceEncoder(encoder.model_bytes)
        plain._words = None
        _, wall, cpu = timed(lambda: plain.encode(sentences, num_threads=t))
        line("tokenisation, SentencePiece per sentence", n, wall, cpu)
        out = np.zeros((n, table.shape[1]), dtype=np.float32)
        textless = encoder.textless_ids
        mean_pool(table, ids, offsets, out=out, textless_ids=textless, threads=t)  # compiled
        _, wall, cpu = timed(
            lambda: mean_pool(table, ids, offsets, out=out, textless_ids=textless, threads=t)
        )
        line("pooling, compiled loop (reused buffer)", n, wall, cpu)
        if t == 1:
            former = np.zeros_like(out)
            _, wall, cpu = timed(lambda: former_pool(table, ids, offsets, former))
            line("pooling, former sparse product", n, wall, cpu)
            textful = ~np.all(former == 0, axis=1)
            same = np.array_equal(out[textful], former[textful])
            print(f"  compiled loop and sparse product give the same bits: {same}")


def encoders(model_dir: Path, tmp: Path, sentences_path: Path, threads: int) -> dict:
    """Each encoder in a fresh process (Table 5's worker), 1 thread and ``threads``."""
    st = export_model(model_dir, tmp / "st", library="sentence-transformers")
    m2v = export_model(model_dir, tmp / "m2v", library="model2vec")
    specs = {
        "PSPModel.embed": f"psp:{model_dir}",
        "sentence-transformers StaticEmbedding": f"st:{st}",
        "model2vec StaticModel": f"m2v:{m2v}",
    }
    rates = {}
    for t in sorted({1, threads}):
        print(f"each encoder in a fresh process, {t} thread(s), same vocabulary and lines:")
        for name, spec in specs.items():
            found = run_worker(spec, t, sentences_path)
            if found is None:
                continue
            rates[name, t] = found["sentences"] / found["seconds"]
            print(
                f"  {name:<38} {rates[name, t]:9,.0f} sent/s wall (first pass "
                f"{found['sentences'] / found['first_pass_s']:,.0f}), "
                f"{found['sentences'] / found['cpu_s']:9,.0f} per CPU-second; the encoder "
                f"{found['encoder_mib']:,.0f} MiB (loaded {found['loaded_rss_mib'] - found['start_rss_mib']:,.0f}), "
                f"peak RSS {found['peak_rss_mib']:,.0f} MiB",
                flush=True,
            )
        ours = rates["PSPModel.embed", t]
        for name in specs:
            if name != "PSPModel.embed" and (name, t) in rates:
                print(f"  PSPModel.embed / {name}: {ours / rates[name, t]:.1f}x")
    return rates


def run_process(cmd: list[str], tmp: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of one process."""
    report = tmp / "process.txt"
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(report), *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    status, wall, cpu, rss_kib = report.read_text().split()
    if done.returncode != 0 or status != "0":
        raise RuntimeError(f"{cmd} failed: {done.stderr.decode()}")
    return float(wall), float(cpu), int(rss_kib) / 1024


def whole_process(model_dir: Path, news: list[str], sizes: list[int], rate: float, tmp: Path):
    """``psp embed --threads 1`` at each size, against the in-process rate ``rate``, after its
    fixed cost: the same command on one line (start-up, loading the model, writing the file)."""
    print("psp embed as a whole process, --threads 1:")
    one = tmp / "one.txt"
    one.write_text(news[0] + "\n", encoding="utf-8")
    cmd = [*CLI, "embed", "--model", str(model_dir), "--threads", "1"]
    walls = [run_process([*cmd, "--input", str(one), "--output", str(tmp / "one.npy")], tmp)[0]]
    walls += [run_process([*cmd, "--input", str(one), "--output", str(tmp / "two.npy")], tmp)[0]]
    print(f"  {1:>9,} line  (the fixed cost): {min(walls):.2f}-{max(walls):.2f} s wall", flush=True)
    for n in sizes:
        text = tmp / f"news{n}.txt"
        text.write_text("\n".join(itertools.islice(itertools.cycle(news), n)) + "\n")
        for extra in ([], ["--float16"]):
            cmd = [*CLI, "embed", "--model", str(model_dir), "--threads", "1", *extra]
            cmd += ["--input", str(text), "--output", str(tmp / "out.npy")]
            # A fresh output each time: renaming over the previous file makes ext4 write the new
            # one out at once (its auto_da_alloc), 1.1 s for 470 MB here, not the command's work.
            (tmp / "out.npy").unlink(missing_ok=True)
            wall, cpu, rss = run_process(cmd, tmp)
            print(
                f"  {n:>9,} lines {' '.join(extra) or 'float32':9}: {n / wall:9,.0f} sent/s "
                f"wall ({wall:.1f} s), {n / cpu:9,.0f} per CPU-second, peak RSS {rss:,.0f} MiB; "
                f"{n / wall / rate:.2f}x the in-process rate",
                flush=True,
            )
        text.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a model directory (else a random table)")
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=3, help="copies of newstest-en to embed")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--baseline-sentences", type=int, default=10000)
    parser.add_argument("--lines", type=int, nargs="*", default=[120_000, 1_200_000])
    parser.add_argument("--json", type=Path, help="also write the encoders' rates here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_embed.") as tmp:
        tmp = Path(tmp)
        model_dir = args.model or random_model(tmp, args.dim, args.vocab_size)
        news = read_gz(NEWS)
        sentences = news * args.repeat
        sentences_path = tmp / "sentences.txt"
        sentences_path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        in_process(model_dir, sentences, args.threads)
        rates = encoders(model_dir, tmp, sentences_path, args.threads)
        whole_process(model_dir, news, args.lines, rates["PSPModel.embed", 1], tmp)
        subset = sentences[: args.baseline_sentences]
        base, wall, cpu = timed(lambda: original_embed(model_dir, subset))
        print("the original recipe, 1 thread:")
        base_rate = line(f"{len(subset):,} sentences", len(subset), wall, cpu)
        from psp.model.torch_model import load

        ours = load(model_dir).embed(subset, num_threads=1)
        print(
            f"  max |original - psp|: {float(np.abs(base - ours).max()):.2e}; "
            f"PSPModel.embed / original {rates['PSPModel.embed', 1] / base_rate:.1f}x"
        )
        if args.json:
            with atomic_open(args.json) as fh:
                json.dump({f"{k[0]} {k[1]}": v for k, v in rates.items()}, fh, indent=1)


if __name__ == "__main__":
    main()
