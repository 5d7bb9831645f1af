"""Peak memory of ``psp.data.pairs_store.write_pairs`` must not grow with the corpus: 0.5M vs 2M
pairs.

Generates synthetic pair lines (Zipf-distributed random words, news-like lengths) streaming to a
temporary ``.tsv.gz``, trains a small SentencePiece model on a slice, then runs ``write_pairs``
in a fresh subprocess per case and reads each child's own peak RSS. The in-run baseline is the
0.5M-pair run: the 2M/0.5M ratio should be about 1.0 because only one shuffle bucket
(``--bucket-pairs``) is ever held in memory. It also prints pairs/s, file size and read speed
without and with lzf compression, and the RSS of a child that only loads the modules.

    python benchmarks/bench_hdf5_memory.py                  # 2M lines, a few minutes on 2 cores
    python benchmarks/bench_hdf5_memory.py --lines 400000 --small 100000   # quick look
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def peak_rss_mib() -> float:
    """This process's peak RSS. ``VmHWM`` is per address space, so unlike ``ru_maxrss`` (which
    survives ``exec``) it does not inherit the parent's peak at fork time."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux units: KiB


def generate(path_big: Path, path_small: Path, *, lines: int, small: int, seed: int = 0) -> None:
    """Write ``lines`` pairs to ``path_big`` and the first ``small`` of them to ``path_small``.

    Each side is drawn from a pool of 200k sentences of 4-40 Zipf-distributed random words, so
    generating millions of lines costs little more than gzip.
    """
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzáéñ"))
    word_lengths = rng.integers(2, 11, size=30_000)
    chars = rng.choice(letters, size=int(word_lengths.sum())).tolist()
    bounds = np.concatenate([[0], np.cumsum(word_lengths)]).tolist()
    vocab = ["".join(chars[a:b]) for a, b in itertools.pairwise(bounds)]
    zipf = 1.0 / np.arange(1, len(vocab) + 1)
    lengths = rng.integers(4, 41, size=200_000)
    words = rng.choice(len(vocab), size=int(lengths.sum()), p=zipf / zipf.sum()).tolist()
    bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    pool = [" ".join(map(vocab.__getitem__, words[a:b])) for a, b in itertools.pairwise(bounds)]
    block = 100_000
    with (
        gzip.open(path_big, "wt", compresslevel=1) as big,
        gzip.open(path_small, "wt", compresslevel=1) as sm,
    ):
        for start in range(0, lines, block):
            picks = rng.integers(0, len(pool), size=(min(block, lines - start), 2)).tolist()
            rows = [f"{pool[i]}\t{pool[j]}\n" for i, j in picks]
            big.writelines(rows)
            if start < small:
                sm.writelines(rows[: small - start])


def child(args: argparse.Namespace) -> None:
    """Runs in a fresh interpreter: one ``write_pairs`` (or only the imports), then a read pass."""
    from psp.data.pairs_store import PairReader, write_pairs
    from psp.model.piece_encoder import PieceEncoder

    PieceEncoder(args.model)
    if args.tsv is None:
        print(json.dumps({"peak_rss_mib": peak_rss_mib()}))
        return
    stats = write_pairs(
        args.tsv,
        args.model,
        args.out,
        bucket_pairs=args.bucket_pairs,
        compression=None if args.compression == "none" else args.compression,
        num_threads=1,
    )
    result = {"peak_rss_mib": peak_rss_mib(), **stats}
    started = time.perf_counter()
    with PairReader(args.out) as reader:
        for _, batch in reader.iter_chunks(12_800):
            pass
    result["read_s"] = time.perf_counter() - started
    result["file_mib"] = Path(args.out).stat().st_size / 2**20
    print(json.dumps(result))


def run_child(
    model: Path, *, tsv: Path | None, out: Path | None, compression: str, bucket_pairs: int
) -> dict:
    cmd = [sys.executable, __file__, "--child", "--model", str(model), "--compression", compression]
    cmd += ["--bucket-pairs", str(bucket_pairs)]
    if tsv is not None:
        cmd += ["--tsv", str(tsv), "--out", str(out)]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--small", type=int, default=500_000)
    parser.add_argument("--bucket-pairs", type=int, default=100_000)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tsv", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--compression", default="none", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.child:
        child(args)
        return

    from psp.data.spm_training import train_spm_from_pairs

    with tempfile.TemporaryDirectory(prefix="bench-hdf5-") as tmp:
        tmp = Path(tmp)
        big, small = tmp / "big.tsv.gz", tmp / "small.tsv.gz"
        started = time.perf_counter()
        generate(big, small, lines=args.lines, small=args.small)
        print(f"generated {args.lines:,} pair lines in {time.perf_counter() - started:.0f} s")
        model = train_spm_from_pairs(
            small, tmp / "bench.model", args.vocab_size, input_sentence_size=200_000
        )

        baseline = run_child(
            model, tsv=None, out=None, compression="none", bucket_pairs=args.bucket_pairs
        )
        print(f"imports + model only: peak RSS {baseline['peak_rss_mib']:.0f} MiB")
        rows = {}
        for name, tsv, compression in [
            ("small", small, "none"),
            ("small", small, "lzf"),
            ("big", big, "none"),
        ]:
            r = run_child(
                model,
                tsv=tsv,
                out=tmp / f"{name}-{compression}.h5",
                compression=compression,
                bucket_pairs=args.bucket_pairs,
            )
            rows[name, compression] = r
            print(
                f"{r['n_pairs']:>9,} pairs  {compression:4}  {r['buckets']:3} buckets  "
                f"peak RSS {r['peak_rss_mib']:6.0f} MiB  write {r['n_pairs'] / r['seconds']:7,.0f} pairs/s  "
                f"file {r['file_mib']:6.1f} MiB  read {r['n_pairs'] / r['read_s']:10,.0f} pairs/s"
            )
            (tmp / f"{name}-{compression}.h5").unlink()
        a, b = rows["small", "none"], rows["big", "none"]
        print(
            f"peak RSS ratio {b['n_pairs'] / a['n_pairs']:.0f}x pairs: {b['peak_rss_mib'] / a['peak_rss_mib']:.2f} (flat = 1.0)"
        )
        print(
            f"lzf / none: file size {rows['small', 'lzf']['file_mib'] / a['file_mib']:.2f}, "
            f"read time {rows['small', 'lzf']['read_s'] / a['read_s']:.2f}, "
            f"write time {rows['small', 'lzf']['seconds'] / a['seconds']:.2f}"
        )


if __name__ == "__main__":
    main()
