"""Training speed per worker count against the former step, with the quality of each model.

One command, one run, the same data and hyperparameters for every row (the paper's: dim 1024,
batch 128, mega-batch 100; ``anneal`` 1 so the mega-batch reaches 100 within the first 100
steps and the whole run trains at it). The data: the default run's English corpora read from
the data mirror (ParaSCI, Flickr30k captions, the es-, fr- and de-en bitext), lowercased, with a
SentencePiece model of each ``--vocab`` size, written with ``psp.data.pairs_store.write_pairs``.

Rows, for each vocabulary:

- ``former step``: one worker on one thread, with the step this trainer had before its compiled
  kernels (:func:`former_step`: float32 mining, the torch-op row gradient and ``torch._fused_adam_``
  over gathered rows, which other devices still run): the baseline;
- ``N workers``: ``train.workers: N`` with ``threads: N`` (one thread per worker).

For each row: pairs per second of training (the run's pairs over its mega-batch seconds, the
log's ``elapsed``: no start-up, evaluation or checkpoints), its ratio to the baseline, the
efficiency ``rate / (N * rate of 1 worker)``, the wall seconds of the whole run, the time split
per 100 steps, one mega-batch at the cap (``train_log.tsv``'s phase columns, seconds summed
over workers: data wait, embedding and mining, steps, optimizer updates) and, after the same epochs, STS-B dev/test
Spearman x 100 and Tatoeba spa error % (mean of both directions). Last, the optimizer update
alone for a real minibatch's rows: the lazy kernel against dense Adam.

    python benchmarks/bench_train.py [--data ../shared/data] [--epochs 2] [--workers 1 2]
        [--vocab 8000 50000] [--no-baseline] [--device cuda --workers 1]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from psp.data.pairs_store import write_pairs
from psp.data.spm_training import train_spm
from psp.evaluate import StsbEvaluator, TatoebaEvaluator
from psp.io import atomic_open
from psp.model.torch_model import load
from psp.train import TrainConfig, train
from psp.train.log import PHASE_COLUMNS
from psp.train.ops import sorted_row_gradients
from psp.train.optim import DenseAdam, LazyAdam, fused_adam_rows_

REPO = Path(__file__).resolve().parents[1]
#: The default run's English corpora (config.yaml, models.en), read without its filters.
PARAPHRASE = ("parasci/acl-train", "parasci/arxiv-val", "parasci/arxiv-test")
PARAPHRASE += ("flickr30k-captions/train", "flickr30k-captions/val")
BITEXT = ("es-en/wmt-newstest", "es-en/un-v1.0-dev-test", "fr-en/wmt-newstest")
BITEXT += ("fr-en/un-v1.0-dev-test", "de-en/wmt-newstest", "es-en/xnli", "fr-en/xnli")
BITEXT += ("de-en/xnli",)


def read_pairs(data: Path) -> list[tuple[str, str]]:
    """Lowercased pairs of :data:`PARAPHRASE` (``sent1<TAB>sent2[...]``) and :data:`BITEXT`."""
    pairs = []
    for name in PARAPHRASE:
        with gzip.open(data / "paraphrase" / f"{name}.tsv.gz", "rt", encoding="utf-8") as fh:
            pairs += [tuple(line.rstrip("\n").split("\t")[:2]) for line in fh]
    for name in BITEXT:
        pair, corpus = name.split("/")
        xx = pair.split("-")[0]
        base = data / "bitext" / pair / corpus
        with gzip.open(f"{base}.{xx}.gz", "rt") as src, gzip.open(f"{base}.en.gz", "rt") as tgt:
            pairs += [(a.rstrip("\n"), b.rstrip("\n")) for a, b in zip(src, tgt)]
    return [(a.strip().lower(), b.strip().lower()) for a, b in pairs if a.strip() and b.strip()]


def prepare(pairs: list[tuple[str, str]], vocab: int, out: Path) -> tuple[Path, Path]:
    """SentencePiece of ``vocab`` pieces over both sides, then the training HDF5."""
    out.mkdir(parents=True, exist_ok=True)
    tsv = out.parent / "pairs.tsv.gz"
    if not tsv.exists():
        with atomic_open(tsv) as fh:
            fh.writelines(f"{a}\t{b}\n" for a, b in pairs)
    spm = train_spm(
        [s for p in pairs for s in p],
        out / "spm.model",
        vocab_size=vocab,
        num_threads=os.cpu_count() or 1,
    )
    write_pairs(tsv, spm, out / "pairs.h5", seed=0)
    return out / "pairs.h5", spm


@contextlib.contextmanager
def former_step() -> Iterator[None]:
    """Train with the step as it was before the compiled kernels: negatives from a float32
    product, the pooled rows' gradient with torch ops and Adam through ``torch._fused_adam_``
    on gathered rows, written back (the CUDA path's ops, run on the CPU)."""
    with (
        mock.patch("psp.train.negatives.bfloat16_is_fast", lambda device: False),
        mock.patch("psp.train.step.row_gradients", sorted_row_gradients),
        mock.patch("psp.train.kernels.adam_rows_", fused_adam_rows_),
    ):
        yield


def quality(model_dir: Path, stsb, tatoeba) -> dict[str, float]:
    model = load(model_dir)
    scores = stsb(model) | tatoeba(model)
    return {
        "stsb_dev": scores["stsb_dev_spearman"],
        "stsb_test": scores["stsb_test_spearman"],
        "tatoeba_spa": scores["tatoeba_spa_error"],
    }


def epoch_rows(work: Path) -> list[dict]:
    with open(work / "train_log.tsv", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh, delimiter="\t") if r["event"] == "epoch"]


def bench_run(
    name: str,
    *,
    workers: int,
    h5: Path,
    spm: Path,
    n_pairs: int,
    args: argparse.Namespace,
    out: Path,
    evaluators,
    context=contextlib.nullcontext,
) -> dict:
    """Train one row and measure it (see the module docstring)."""
    cfg = TrainConfig(
        epochs=args.epochs,
        anneal=1,
        threads=workers,
        workers=workers,
        device=args.device,
        log_every=100,
        checkpoint_every=10**9,
        select_best=False,
    )
    start = time.perf_counter()
    with context():
        model = train(cfg, h5, spm, model_dir=out / "model", work_dir=out / "work")
    wall = time.perf_counter() - start
    rows = epoch_rows(out / "work")
    hundreds = int(rows[-1]["step"]) / cfg.megabatch_size  # mega-batches at the cap, nearly all
    split = {c[:-2]: sum(float(r[c]) for r in rows) / hundreds for c in PHASE_COLUMNS}
    return {
        "run": name,
        "workers": workers,
        "pairs_per_s": n_pairs * args.epochs / float(rows[-1]["elapsed"]),
        "wall_s": wall,
        "per_100_steps_s": split,
        **quality(model, *evaluators),
    }


def optimizer_step_ms(
    h5: Path, *, vocab: int, sparse: bool, dim: int = 1024, reps: int = 5
) -> float:
    """CPU ms of one optimizer update for the rows a real minibatch touches (its 128 pairs and
    256 negatives ~ 512 sentences), with a table of ``vocab`` rows."""
    from psp.data.pairs_store import PairReader

    with PairReader(h5) as reader:
        batch = reader.read(0, 256)
    rows = torch.from_numpy(np.unique(np.concatenate([batch.src_ids, batch.tgt_ids]))).long()
    table = torch.randn(vocab, dim)
    optimizer = (LazyAdam if sparse else DenseAdam)(table)
    grad = torch.randn(len(rows), dim)
    optimizer.step(rows, grad)
    start = time.process_time()
    for _ in range(reps):
        optimizer.step(rows, grad)
    return 1000 * (time.process_time() - start) / reps


def report(row: dict, base: dict | None, one: dict | None) -> str:
    split = " ".join(f"{k} {v:.2f}" for k, v in row["per_100_steps_s"].items())
    ratio = f" {row['pairs_per_s'] / base['pairs_per_s']:.2f}x former" if base else ""
    eff = ""
    if one and row["workers"] > 1:
        eff = f", efficiency {row['pairs_per_s'] / (row['workers'] * one['pairs_per_s']):.2f}"
    return (
        f"{row['run']:>12}: {row['pairs_per_s']:7,.0f} pairs/s{ratio}{eff} | whole run "
        f"{row['wall_s']:.0f} s | per 100 steps (CPU s): {split} | STS-B dev "
        f"{row['stsb_dev']:.1f} test {row['stsb_test']:.1f}, Tatoeba spa error "
        f"{row['tatoeba_spa']:.1f}"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=os.environ.get("PSP_SHARED_DATA", REPO.parent / "shared" / "data"),
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--vocab", type=int, nargs="+", default=[8000, 50000])
    parser.add_argument("--no-baseline", dest="baseline", action="store_false")
    parser.add_argument("--device", default="cpu", help="cuda: one worker on the GPU")
    parser.add_argument("--limit", type=int, help="train on the first N pairs only (tests)")
    parser.add_argument("--json", type=Path, help="also write every row here, one per line")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    evaluators = (
        StsbEvaluator.from_dir(args.data, splits=("dev", "test")),
        TatoebaEvaluator.from_dir(args.data, languages=["es"]),
    )
    pairs = read_pairs(args.data)[: args.limit]
    rows = []
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{os.cpu_count()} CPUs"
    print(f"data: {len(pairs):,} pairs; torch {torch.__version__}, {where}")
    with tempfile.TemporaryDirectory(prefix="bench_train.") as tmp:
        for vocab in args.vocab:
            h5, spm = prepare(pairs, vocab, Path(tmp) / f"v{vocab}")
            runs = [("former step", 1, former_step)] if args.baseline else []
            runs += [
                (f"{w} worker{'s' * (w > 1)}", w, contextlib.nullcontext) for w in args.workers
            ]
            print(f"vocabulary {vocab:,}:")
            done = {}
            for name, workers, context in runs:
                row = bench_run(
                    name,
                    workers=workers,
                    h5=h5,
                    spm=spm,
                    n_pairs=len(pairs),
                    args=args,
                    out=Path(tmp) / f"v{vocab}" / name.replace(" ", "-"),
                    evaluators=evaluators,
                    context=context,
                )
                done[name] = row
                print(report(row, done.get("former step"), done.get("1 worker")), flush=True)
                rows.append(row | {"vocab": vocab})
            lazy, dense = (optimizer_step_ms(h5, vocab=vocab, sparse=s) for s in (True, False))
            print(f"optimizer update alone: lazy {lazy:.1f} ms, dense {dense:.1f} ms CPU")
    if args.json:
        with atomic_open(args.json) as fh:
            fh.writelines(json.dumps(row) + "\n" for row in rows)


if __name__ == "__main__":
    main()
