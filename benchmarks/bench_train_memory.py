"""Training memory stays flat as the corpus grows: peak RSS for 1M vs 4M pairs, with one worker
and with two (the coordinator and its largest worker process).

Writes two synthetic training files in the ``docs/design.md`` §4 layout with h5py (random piece ids, 5-40
pieces per sentence, ``spm_sha256`` of a small real SentencePiece model so the trainer accepts
them), then trains the same bounded number of steps on each in a fresh subprocess (dim 1024,
batch 128; with ``anneal`` 1 the mega-batch reaches 100 at step 127, and training stops at the
end of that first 100-minibatch mega-batch) and prints each peak RSS and the ratio.
The trainer holds the block permutation (n / 64 integers) and a window or two of pairs, so
the 4x larger file should cost next to no more memory, with any number of workers.

    python benchmarks/bench_train_memory.py [--sizes 1000000 4000000] [--steps 128] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np

from psp.data.pairs_store import LAYOUT_VERSION
from psp.data.spm_training import train_spm
from psp.io import atomic_path
from psp.model.piece_encoder import PieceEncoder

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
from psp.train import TrainConfig, train
h5, spm, out, steps, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
cfg = TrainConfig(
    epochs=1, anneal=1, max_steps=steps, threads=2, workers=workers, checkpoint_every=10**9
)
wall, cpu = time.perf_counter(), time.process_time()
model_dir = train(cfg, h5, spm, model_dir=out + "/model", work_dir=out + "/work")
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
steps = json.loads((model_dir / "config.json").read_text())["provenance"]["steps"]
peaks = [resource.getrusage(who).ru_maxrss / 1024 for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
print(json.dumps({"peak_rss_mib": peaks, "steps": steps, "wall_s": wall, "cpu_s": cpu}))
"""


def write_synthetic(path: Path, n_pairs: int, encoder: PieceEncoder, chunk: int = 500_000) -> None:
    """Random pairs in the training layout, written chunk by chunk (bounded memory here too)."""
    rng = np.random.default_rng(n_pairs)
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as h5:
        for side in ("src", "tgt"):
            ids = h5.create_dataset(
                f"{side}/ids", (0,), np.int32, maxshape=(None,), chunks=(1 << 18,)
            )
            offsets = h5.create_dataset(
                f"{side}/offsets", (n_pairs + 1,), np.int64, chunks=(1 << 16,)
            )
            offsets[0] = 0
            total = 0
            for lo in range(0, n_pairs, chunk):
                lengths = rng.integers(5, 41, min(chunk, n_pairs - lo))
                piece_ids = rng.integers(1, encoder.vocab_size, int(lengths.sum()), np.int32)
                ids.resize((total + len(piece_ids),))
                ids[total:] = piece_ids
                offsets[lo + 1 : lo + 1 + len(lengths)] = total + np.cumsum(lengths)
                total += len(piece_ids)
        h5.attrs.update(
            {
                "layout_version": LAYOUT_VERSION,
                "n_pairs": n_pairs,
                "languages": ["xx", "en"],
                "spm_sha256": encoder.sha256,
                "vocab_size": encoder.vocab_size,
            }
        )


def small_spm(data: Path, out: Path) -> Path:
    base = data / "bitext" / "es-en" / "wmt-newstest"
    lines = []
    for lang in ("es", "en"):
        with gzip.open(f"{base}.{lang}.gz", "rt") as fh:
            lines += [line.strip() for _, line in zip(range(3000), fh) if line.strip()]
    return train_spm(lines, out, vocab_size=2000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=os.environ.get("PSP_SHARED_DATA", REPO.parent / "shared" / "data"),
    )
    parser.add_argument("--sizes", type=int, nargs=2, default=[1_000_000, 4_000_000])
    parser.add_argument("--steps", type=int, default=128)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_train_memory.") as tmp:
        tmp = Path(tmp)
        spm = small_spm(args.data, tmp / "spm.model")
        encoder = PieceEncoder(spm)
        peaks: dict[int, list[float]] = {workers: [] for workers in args.workers}
        for n in args.sizes:
            h5 = tmp / f"pairs{n}.h5"
            write_synthetic(h5, n, encoder)
            size_mib = h5.stat().st_size / 2**20
            for workers in args.workers:
                out = tmp / f"run{n}-{workers}"
                command = [sys.executable, "-c", CHILD, h5, spm, out, args.steps, workers]
                run = subprocess.run(
                    [str(a) for a in command], capture_output=True, text=True, check=True
                )
                result = json.loads(run.stdout.strip().splitlines()[-1])
                coordinator, worker = result["peak_rss_mib"]
                peaks[workers].append(max(coordinator, worker))
                print(
                    f"{n:>9,} pairs ({size_mib:,.0f} MiB on disk), {workers} worker(s): peak RSS "
                    f"{coordinator:,.0f} MiB (largest worker process {worker:,.0f}) after "
                    f"{result['steps']} steps (mega-batch 100 reached) in {result['wall_s']:.0f}s "
                    f"wall, {result['cpu_s']:.0f} CPU-s"
                )
            h5.unlink()
        for workers, values in peaks.items():
            print(
                f"peak RSS ratio {args.sizes[1]:,} / {args.sizes[0]:,} pairs, {workers} "
                f"worker(s): {values[1] / values[0]:.3f}"
            )


if __name__ == "__main__":
    main()
