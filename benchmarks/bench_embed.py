"""Raw text → embeddings throughput of ``PSPModel.embed`` against the original P-SP recipe.

The baseline, run in the same process on the same model, embeds the way the original
``embed_sentences.py`` does: batches of 32, per-sentence lowercasing and ``EncodeAsPieces``, a
Python dict lookup per piece (unknown pieces dropped, an empty sentence → the unknown row), padding
to the longest sentence, a padded ``nn.Embedding`` lookup and a length-masked mean. Both produce the
same vectors (checked below); the ratio is what batching + ``embedding_bag`` buys.

Single-thread rates are reported as wall-clock and as process CPU time: on a machine shared with
other jobs the CPU-time rate is the better estimate of what one dedicated core does.

    python benchmarks/bench_embed.py [--spm results/spm/en.model] [--dim 1024] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from psp.model import PSPModel
from psp.spm import train_spm

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PSP_SHARED_DATA", REPO.parent / "shared" / "data"))
NEWS = DATA / "mono" / "en" / "wmt-newstest-en.txt.gz"


def read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def english_training_text(limit: int) -> list[str]:
    """English sides of the mirror's bitexts: the SentencePiece training text."""
    lines: list[str] = []
    for path in sorted(DATA.glob("bitext/*-en/*.en.gz")):
        lines.extend(read_gz(path))
    return lines[:limit]


def timed(fn):
    """Run ``fn``; return its result, wall seconds and process CPU seconds (user + system)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


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
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        spm_path = args.spm
        if spm_path is None:
            spm_path = Path(tmp) / "en.model"
            text = english_training_text(100_000)
            _, wall, _ = timed(
                lambda: train_spm(text, spm_path, args.vocab_size, num_threads=os.cpu_count())
            )
            print(f"trained SentencePiece on {len(text)} English bitext lines in {wall:.0f}s")
        model = PSPModel.from_spm(spm_path, args.dim, seed=0)
    run(model, read_gz(NEWS) * args.repeat, args)


def run(model: PSPModel, sentences: list[str], args: argparse.Namespace) -> None:
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


if __name__ == "__main__":
    main()
