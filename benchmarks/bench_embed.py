"""Raw text → embeddings: ``PSPModel.embed`` in process, and ``psp embed`` / ``psp score`` as
whole processes.

In process, the baseline, run on the same model, embeds the way the original
``embed_sentences.py`` does: batches of 32, per-sentence lowercasing and ``EncodeAsPieces``, a
Python dict lookup per piece (unknown pieces dropped, an empty sentence → the unknown row), padding
to the longest sentence, a padded ``nn.Embedding`` lookup and a length-masked mean. Both produce the
same vectors (checked below); the ratio is what batching and one sparse product per block buy.

Single-thread rates are reported as wall-clock and as process CPU time, timed by
:func:`psp.evaluate.timing.timed` like every speed figure of the project (the evaluation harness,
Table 5): on a machine shared with other jobs the CPU-time rate is the better estimate of what
one dedicated core does.

As whole processes (start-up, model load, reading, writing the ``.npy`` included), on the same
model saved to disk and newstest-en repeated to each size, with ``--threads 1``: ``psp embed``
and ``psp score`` against the previous commands, re-enacted here (``--previous``): the same
streaming, but the model loaded with torch (``psp.load``, importing torch: about 2 s of CPU)
and pooled by ``F.embedding_bag``, the input read a line at a time. The two versions alternate,
``--process-repeats`` times each, and the best wall and CPU times are kept (the machine may be
shared). Wall time, CPU time (user + system) and peak RSS per process come from ``os.wait4`` in
a small launcher; the ratio of the whole-process rate to the in-process rate above says what the
process costs. Peak RSS should not grow with the number of lines.

    python benchmarks/bench_embed.py [--spm results/spm/en.model] [--dim 1024] [--repeat 3]
        [--lines 120000 1200000] [--process-repeats 3]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from psp.evaluate.timing import timed
from psp.io import atomic_open, iter_lines
from psp.model import PSPModel
from psp.spm import train_spm

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PSP_SHARED_DATA", REPO.parent / "shared" / "data"))
NEWS = DATA / "mono" / "en" / "wmt-newstest-en.txt.gz"
CLI = [sys.executable, "-c", "import sys; from psp.cli import main; sys.exit(main())"]
PREVIOUS = [sys.executable, __file__, "--previous"]
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


def english_training_text(limit: int) -> list[str]:
    """English sides of the mirror's bitexts: the SentencePiece training text."""
    lines: list[str] = []
    for path in sorted(DATA.glob("bitext/*-en/*.en.gz")):
        lines.extend(read_gz(path))
    return lines[:limit]


def original_embed(model: PSPModel, sentences: list[str], batch_size: int = 32) -> np.ndarray:
    """The original recipe, batch by batch (see the module docstring)."""
    sp = model.encoder._sp
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    unk = model.config.unk_id
    del vocab[sp.id_to_piece(unk)]
    embedding = model.embedding
    out = []
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            rows = []
            for sentence in sentences[start : start + batch_size]:
                pieces = sp.EncodeAsPieces(sentence.lower())
                ids = [vocab[p] for p in pieces if p in vocab] or [unk]
                rows.append(ids)
            width = max(map(len, rows))
            padded = np.zeros((len(rows), width), dtype=np.int64)
            lengths = np.array([len(r) for r in rows], dtype=np.int64)
            for i, ids in enumerate(rows):
                padded[i, : len(ids)] = ids
            idx, lens = torch.from_numpy(padded), torch.from_numpy(lengths)
            vectors = embedding(idx)
            mask = torch.arange(width)[None, :] < lens[:, None]
            vectors = (vectors * mask[:, :, None]).sum(1) / lens[:, None]
            out.append(vectors.numpy())
    return np.vstack(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spm", type=Path, help="existing SentencePiece model (else train one)")
    parser.add_argument("--vocab-size", type=int, default=16000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3, help="copies of newstest-en to embed")
    parser.add_argument("--baseline-sentences", type=int, default=10000)
    parser.add_argument("--batch-size", type=int, default=8192)
    parser.add_argument(
        "--lines", type=int, nargs="*", default=[120_000, 1_200_000], help="whole-process sizes"
    )
    parser.add_argument("--process-repeats", type=int, default=3, help="runs of each process")
    parser.add_argument(
        "--previous",
        nargs=4,
        metavar=("COMMAND", "MODEL", "INPUT", "OUTPUT"),
        help="run the previous embed or score command (the whole-process baseline) and exit",
    )
    args = parser.parse_args()
    if args.previous:
        command, model_dir, input_path, output = args.previous
        previous_command(
            command, model_dir, input_path=input_path, output=output, batch_size=args.batch_size
        )
        return

    with tempfile.TemporaryDirectory() as tmp:
        spm_path = args.spm
        if spm_path is None:
            spm_path = Path(tmp) / "en.model"
            text = english_training_text(100_000)
            _, wall, _ = timed(
                lambda: train_spm(
                    text, spm_path, vocab_size=args.vocab_size, num_threads=os.cpu_count()
                )
            )
            print(f"trained SentencePiece on {len(text)} English bitext lines in {wall:.0f}s")
        model = PSPModel.from_spm(spm_path, args.dim, seed=0)
        news = read_gz(NEWS)
        library_rate = run(model, news * args.repeat, args)
        model_dir = model.save(Path(tmp) / "model")
        del model
        whole_process(
            model_dir,
            news,
            sizes=args.lines,
            library_rate=library_rate,
            tmp=Path(tmp),
            repeats=args.process_repeats,
        )


def run(model: PSPModel, sentences: list[str], args: argparse.Namespace) -> float:
    """In-process figures; returns the 1-thread rate into a reused buffer (the library rate)."""
    n = len(sentences)
    ids, offsets = model.encoder.encode(sentences[:20000])
    print(
        f"model: dim {model.dim}, vocab {model.config.vocab_size}; {n} sentences "
        f"({args.repeat} x newstest-en), {np.diff(offsets).mean():.1f} pieces/sentence"
    )

    def line(name: str, count: int, wall: float, cpu: float | None = None) -> None:
        cpu_part = "" if cpu is None else f", {count / cpu:9,.0f} sent/s of process CPU time"
        print(f"{name:<34} {count / wall:9,.0f} sent/s wall{cpu_part}")

    model.embed(sentences[:2000], num_threads=1)  # warm up
    ours, wall1, cpu1 = timed(lambda: model.embed(sentences, args.batch_size, num_threads=1))
    line("psp embed, 1 thread", n, wall1, cpu1)
    _, wall, cpu = timed(lambda: model.embed(sentences, args.batch_size, num_threads=1, out=ours))
    line("  same, into a reused out= buffer", n, wall, cpu)
    library_rate = n / wall
    _, wall, cpu = timed(lambda: model.encoder.encode(sentences, num_threads=1))
    line("  of which PieceEncoder.encode", n, wall, cpu)
    threads = os.cpu_count() or 1
    _, wall_all, _ = timed(lambda: model.embed(sentences, args.batch_size, num_threads=threads))
    line(f"psp embed, {threads} threads", n, wall_all)

    torch.set_num_threads(1)
    subset = sentences[: args.baseline_sentences]
    base, base_wall, base_cpu = timed(lambda: original_embed(model, subset))
    line(f"original recipe, 1 thread ({len(subset)})", len(subset), base_wall, base_cpu)
    diff = float(np.abs(base - ours[: len(subset)]).max())
    print(f"max |original - psp| over the baseline sentences: {diff:.2e}")
    rate1, rate_all, base_rate = n / wall1, n / wall_all, len(subset) / base_wall
    print(
        f"ratios: psp/original 1 thread {rate1 / base_rate:.1f}x wall, "
        f"{(n / cpu1) / (len(subset) / base_cpu):.1f}x CPU; "
        f"{threads} threads vs 1 thread {rate_all / rate1:.2f}x; "
        f"{threads} threads vs original {rate_all / base_rate:.1f}x"
    )
    return library_rate


def previous_command(
    command: str, model_dir: str, *, input_path: str, output: str, batch_size: int
):
    """``psp embed`` / ``psp score`` before they dropped torch, with ``--threads 1``: the model
    loaded by ``psp.load`` and pooled by torch's ``embedding_bag`` (the library pools with
    :func:`psp.pooling.mean_pool` now), the input read a line at a time."""
    import torch

    from psp.cli.embed import embed_lines
    from psp.cli.score import score_lines
    from psp.io import iter_batches
    from psp.model import load
    from psp.pooling import zero_textless

    torch.set_num_threads(1)
    model = load(model_dir)

    class TorchPooling:
        """The torch model behind the interface the commands call."""

        dim, encoder = model.dim, model.encoder

        @staticmethod
        def pool(ids, offsets, out, threads):
            with torch.inference_mode():
                out[:] = torch.nn.functional.embedding_bag(
                    torch.from_numpy(ids).long(),
                    model.embedding.weight,
                    torch.from_numpy(offsets).long(),
                    mode="mean",
                    include_last_offset=True,
                ).numpy()
            zero_textless(model.encoder.textless_ids, ids, offsets, out)
            return out

    batches = (
        (batch[0][0], [text for _, text in batch])
        for batch in iter_batches(iter_lines(input_path), batch_size)
    )
    with mock.patch("psp.cli.score.iter_input_batches", lambda *_: batches):
        if command == "score":
            with atomic_open(output, "wt") as out:
                score_lines(TorchPooling, input_path, out, batch_size=batch_size, threads=1)
        else:
            embed_lines(
                TorchPooling, batches, output, batch_size=batch_size, threads=1, float16=False
            )


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


def write_inputs(news: list[str], n: int, tmp: Path) -> tuple[Path, Path]:
    """``n`` news lines (cycled) for ``embed``, and the same lines paired up for ``score``."""
    text = tmp / f"news{n}.txt"
    text.write_text("\n".join(itertools.islice(itertools.cycle(news), n)) + "\n")
    pairs = tmp / f"pairs{n // 2}.tsv"
    sentences = iter(text.read_text().splitlines())
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in zip(sentences, sentences)))
    return text, pairs


def best_of(
    runs: list[tuple[str, str, int, list[str]]], *, repeats: int, tmp: Path
) -> dict[tuple[str, str], list[float]]:
    """Each run's best wall, CPU and peak RSS over ``repeats`` rounds; the runs alternate within
    a round, so a load that comes and goes hits them alike."""
    best: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeats):
        for command, version, _count, cmd in runs:
            figures = run_process(cmd, tmp)
            kept = best.setdefault((command, version), list(figures))
            kept[:] = [min(a, b) for a, b in zip(kept, figures, strict=True)]
    return best


def whole_process(
    model_dir: Path,
    news: list[str],
    *,
    sizes: list[int],
    library_rate: float,
    tmp: Path,
    repeats: int,
) -> None:
    print(
        f"whole processes, --threads 1, best of {repeats} alternating runs "
        f"(load average {os.getloadavg()[0]:.2f}):"
    )
    for n in sizes:
        text, pairs = write_inputs(news, n, tmp)
        npy, tsv = tmp / "out.npy", tmp / "out.tsv"
        new = ["--model", str(model_dir), "--threads", "1"]
        embed_io = ["--input", str(text), "--output", str(npy)]
        score_io = ["--input", str(pairs), "--output", str(tsv)]
        runs = [
            ("embed", "previous", n, [*PREVIOUS, "embed", str(model_dir), str(text), str(npy)]),
            ("embed", "new", n, [*CLI, "embed", *new, *embed_io]),
            ("embed --float16", "new", n, [*CLI, "embed", *new, "--float16", *embed_io]),
            (
                "score",
                "previous",
                n // 2,
                [*PREVIOUS, "score", str(model_dir), str(pairs), str(tsv)],
            ),
            ("score", "new", n // 2, [*CLI, "score", *new, *score_io]),
        ]
        best = best_of(runs, repeats=repeats, tmp=tmp)
        rates = {}
        for command, version, count, _cmd in runs:
            wall, cpu, rss = best[command, version]
            rates[command, version] = count / wall, count / cpu
            unit = "pairs" if command == "score" else "sentences"
            print(
                f"  {n:>9,} lines  {command:15s} {version:8s}: {count / wall:7,.0f} {unit}/s wall "
                f"({wall:5.1f} s), {count / cpu:7,.0f} per CPU-second ({cpu:5.1f} s), "
                f"peak RSS {rss:5,.0f} MiB"
            )
        for command in ("embed", "score"):
            new_wall, new_cpu = rates[command, "new"]
            old_wall, old_cpu = rates[command, "previous"]
            print(
                f"  {n:>9,} lines  {command}: new / previous {new_wall / old_wall:.2f}x wall, "
                f"{new_cpu / old_cpu:.2f}x per CPU-second"
            )
        print(
            f"  {n:>9,} lines  embed: whole process {rates['embed', 'new'][0]:,.0f} sentences/s "
            f"wall against {library_rate:,.0f} in process (1 thread): "
            f"{rates['embed', 'new'][0] / library_rate:.2f}x"
        )


if __name__ == "__main__":
    main()
