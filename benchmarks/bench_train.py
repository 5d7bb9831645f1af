"""Training speed: lazy row-sparse Adam vs dense Adam, the per-epoch shuffle vs the former block
order, the pair-weighting loss vs the margin loss, plus STS-B quality.

One command, one run, same data and hyperparameters for all (dim 1024, batch 128, mega-batch
100): lazy Adam with the per-epoch permutation (:mod:`psp.train.data`), lazy Adam with the
former order (contiguous blocks of one capped mega-batch, only the block order permuted per
epoch: kept here, in :func:`former_order`, as the "before" of the shuffle), dense Adam, and
lazy Adam with ``loss: pair_weighting`` (no mega-batch mining; ``--runs`` picks some). The
data: the es-en bitext of the data mirror (wmt-newstest + un-v1.0-dev-test, ~24k pairs),
lowercased, a SentencePiece model of 8k pieces, written with ``psp.hdf5.write_pairs``.

``anneal`` is set to 1 (paper: 150) so that the mega-batch size reaches 100 within the first
epoch; the last epoch then runs entirely at mega-batch 100, and its speed (data reading,
negative mining and updates) is the steady state reported: pairs per wall second, and pairs per
CPU second of the process (on a machine shared with other jobs, wall time says little; with
2 dedicated cores and good scaling, wall pairs/s approaches 2x the per-CPU-second figure).
A second line splits one mega-batch's time into its two phases: reading + embedding + negative
mining (one ``n x n x dim`` matmul) and its 100 minibatch steps (gather, pool, loss, update).
After the same epochs, both models are scored on STS-B dev/test (Spearman x100 of cosine).
Last, the optimizer update alone (CPU ms) for a 8k and a 50k vocabulary: the dense cost grows
with the table, the lazy one with the rows a minibatch uses.

    python benchmarks/bench_train.py [--data ../shared/data] [--epochs 2] [--threads 2]
        [--runs lazy,pair_weighting]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import math
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from scipy.stats import spearmanr

from psp.hdf5 import write_pairs
from psp.io import atomic_open
from psp.model import load
from psp.optim import DenseAdam, LazyAdam
from psp.spm import train_spm
from psp.train import TrainConfig, train
from psp.train.bags import concat_bags, truncated_bags

REPO = Path(__file__).resolve().parents[1]
CORPORA = ("wmt-newstest", "un-v1.0-dev-test")


class BlockOrder:
    """The former epoch order: the file in blocks of one capped mega-batch, blocks permuted."""

    def __init__(self, n_pairs: int, seed: int, epoch: int, window_pairs: int):
        self.n_pairs, self.block = n_pairs, window_pairs
        self.blocks = np.random.default_rng([seed, epoch]).permutation(
            math.ceil(n_pairs / window_pairs)
        )

    def __len__(self) -> int:
        return self.n_pairs


class BlockStream:
    """Reads stream positions of a :class:`BlockOrder` as at most two contiguous slices."""

    def __init__(self, reader, order: BlockOrder, max_pieces: int | None):
        self.reader, self.order, self.max_pieces = reader, order, max_pieces

    def __len__(self) -> int:
        return len(self.order)

    def read(self, start: int, stop: int):
        src, tgt, block = [], [], self.order.block
        for k, b in enumerate(self.order.blocks):
            first = int(b) * block
            length = min(first + block, self.order.n_pairs) - first
            lo, hi = max(start, k * block), min(stop, k * block + length)
            if lo < hi:
                batch = self.reader.read(lo - k * block + first, hi - k * block + first)
                src.append(truncated_bags(batch.src_ids, batch.src_offsets, self.max_pieces))
                tgt.append(truncated_bags(batch.tgt_ids, batch.tgt_offsets, self.max_pieces))
        return concat_bags(src), concat_bags(tgt)


@contextlib.contextmanager
def former_order() -> Iterator[None]:
    """Train with the former block order instead of the per-epoch permutation."""
    with (
        mock.patch("psp.train.loop.EpochOrder", BlockOrder),
        mock.patch("psp.train.loop.EpochStream", BlockStream),
    ):
        yield


#: ``--runs`` key: the run's name, its data order and its training keys.
RUNS = {
    "lazy": ("lazy sparse Adam", contextlib.nullcontext, {}),
    "former_order": ("lazy, former order", former_order, {}),
    "dense": ("dense Adam", contextlib.nullcontext, {"sparse": False}),
    "pair_weighting": ("pair-weighting loss", contextlib.nullcontext, {"loss": "pair_weighting"}),
}
#: Ratio lines printed when both runs took place: label, numerator, denominator.
RATIOS = (
    ("per-epoch shuffle / former order", "lazy sparse Adam", "lazy, former order"),
    ("speed-up lazy/dense", "lazy sparse Adam", "dense Adam"),
    ("pair-weighting / margin loss", "pair-weighting loss", "lazy sparse Adam"),
)


def prepare(data: Path, out: Path) -> tuple[Path, Path, int]:
    """Lowercased es-en pairs → SentencePiece 8k → training HDF5."""
    pairs = []
    for corpus in CORPORA:
        base = data / "bitext" / "es-en" / corpus
        with gzip.open(f"{base}.es.gz", "rt") as es, gzip.open(f"{base}.en.gz", "rt") as en:
            for a, b in zip(es, en):
                a, b = a.strip().replace("\t", " ").lower(), b.strip().replace("\t", " ").lower()
                if a and b:
                    pairs.append((a, b))
    with atomic_open(out / "pairs.tsv.gz") as fh:
        fh.writelines(f"{a}\t{b}\n" for a, b in pairs)
    spm = train_spm(
        [s for p in pairs for s in p], out / "spm.model", vocab_size=8000, num_threads=2
    )
    write_pairs(out / "pairs.tsv.gz", spm, out / "pairs.h5", seed=0)
    return out / "pairs.h5", spm, len(pairs)


def stsb_spearman(model_dir: Path, data: Path) -> dict[str, float]:
    """Spearman x100 of cosine vs gold on STS-B dev and test (``score<TAB>sent1<TAB>sent2``)."""
    model = load(model_dir)
    result = {}
    for split in ("dev", "test"):
        with open(data / "sts" / "stsb" / f"{split}.tsv", encoding="utf-8") as fh:
            rows = [r for r in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE) if r]
        gold = np.array([float(r[0]) for r in rows])
        cosine = model.score([r[1] for r in rows], [r[2] for r in rows])
        result[split] = 100 * spearmanr(cosine, gold).statistic
    return result


class StepClock:
    """``on_step`` hook: wall and process CPU time of every step, to cut out the last epoch."""

    def __init__(self):
        self.wall, self.cpu = {}, {}

    def __call__(self, step: int) -> None:
        self.wall[step], self.cpu[step] = time.perf_counter(), time.process_time()

    def steady_state(
        self, work: Path, n_pairs: int, megabatch: int, batch_size: int
    ) -> dict[str, float]:
        """The last epoch (all at mega-batch ``megabatch``): pairs per wall and per CPU second,
        and where the time of one mega-batch goes: the gap between its last step and the next
        mega-batch's first step (reading, embedding, mining, less one step's time) and its
        ``megabatch`` steps (mean of the step-to-step intervals), in wall and CPU seconds."""
        with open(work / "train_log.tsv", encoding="utf-8") as fh:
            ends = [
                int(r["step"]) for r in csv.DictReader(fh, delimiter="\t") if r["event"] == "epoch"
            ]
        # from the first step of the last epoch: leaves out the epoch-end checkpoint before it
        first, last = ends[-2] + 1, ends[-1]
        n_pairs -= batch_size
        result = {}
        for kind, clock in (("wall", self.wall), ("cpu", self.cpu)):
            gaps = set(range(first + megabatch - 1, last, megabatch))
            total = clock[last] - clock[first]
            between = sum(clock[s + 1] - clock[s] for s in gaps)
            step = (total - between) / (last - first - len(gaps))
            result[f"pairs_per_{kind}_s"] = n_pairs / total
            result[f"mine_{kind}_s"] = between / len(gaps) - step
            result[f"steps_{kind}_s"] = step * megabatch
        return result


def optimizer_step_ms(
    h5: Path, *, vocab: int, sparse: bool, dim: int = 1024, reps: int = 5
) -> float:
    """CPU ms of one optimizer update for the rows a real minibatch touches (its 128 pairs and
    256 negatives ~ 512 sentences), with a table of ``vocab`` rows."""
    from psp.hdf5 import PairReader

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


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=os.environ.get("PSP_SHARED_DATA", REPO.parent / "shared" / "data"),
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--runs",
        type=lambda text: text.split(","),
        default=list(RUNS),
        help=f"comma-separated runs among {','.join(RUNS)} (default: all)",
    )
    return parser.parse_args()


def bench_run(
    key: str, *, args: argparse.Namespace, tmp: Path, h5: Path, spm: Path, n: int
) -> dict[str, float]:
    """Train one ``--runs`` entry, print its two lines and return its steady-state rates."""
    name, order, keys = RUNS[key]
    cfg = TrainConfig(
        epochs=args.epochs,
        anneal=1,
        threads=args.threads,
        log_every=10,
        checkpoint_every=10**9,
        **keys,
    )
    clock = StepClock()
    start, load = time.perf_counter(), os.getloadavg()[0]
    with order():
        out = train(
            cfg,
            h5,
            spm,
            model_dir=tmp / name / "model",
            work_dir=tmp / name / "work",
            on_step=clock,
        )
    wall = time.perf_counter() - start
    rate = clock.steady_state(tmp / name / "work", n, cfg.megabatch_size, cfg.batch_size)
    sts = stsb_spearman(out, args.data)
    print(
        f"{name:>18}: {rate['pairs_per_wall_s']:6.0f} pairs/s, "
        f"{rate['pairs_per_cpu_s']:6.0f} pairs/CPU-s at mega-batch 100 | "
        f"{wall:4.0f}s for {args.epochs} epochs, load avg {load:.1f}->"
        f"{os.getloadavg()[0]:.1f} | STS-B Spearman dev {sts['dev']:.1f} "
        f"test {sts['test']:.1f}"
    )
    between = "read+embed+mine" if cfg.loss == "margin" else "read"
    print(
        f"{'':>18}  per mega-batch: {between} {rate['mine_wall_s']:.2f}s wall "
        f"({rate['mine_cpu_s']:.2f} CPU-s), 100 steps {rate['steps_wall_s']:.2f}s wall "
        f"({rate['steps_cpu_s']:.2f} CPU-s)"
    )
    return rate


def print_ratios(results: dict[str, dict[str, float]]) -> None:
    """The :data:`RATIOS` lines of the runs that took place."""
    for label, top, base in RATIOS:
        if top not in results or base not in results:
            continue
        wall, cpu = (
            results[top][k] / results[base][k] for k in ("pairs_per_wall_s", "pairs_per_cpu_s")
        )
        print(f"{label}: {wall:.2f}x wall, {cpu:.2f}x per CPU-second")


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_train.") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        h5, spm, n = prepare(args.data, tmp)
        print(f"data: {n} pairs, spm 8k, prepared in {time.perf_counter() - t0:.0f}s")
        results = {}
        for key in args.runs:
            results[RUNS[key][0]] = bench_run(key, args=args, tmp=tmp, h5=h5, spm=spm, n=n)
        print_ratios(results)
        print(
            f"(torch {torch.__version__}, {args.threads} threads, dim 1024, batch 128, "
            "mega-batch 100, vocab 8k, grad_clip 5)"
        )
        for vocab in (8000, 50000):
            lazy, dense = (
                optimizer_step_ms(h5, vocab=vocab, sparse=sparse) for sparse in (True, False)
            )
            print(
                f"optimizer update, vocab {vocab:>6,} x 1024: lazy {lazy:6.1f} ms, "
                f"dense {dense:6.1f} ms CPU -> {dense / lazy:.1f}x"
            )


if __name__ == "__main__":
    main()
