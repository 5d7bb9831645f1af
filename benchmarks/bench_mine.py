"""Time and peak memory of the shard/block kNN mining path, against an all-pairs baseline.

Synthetic L2-normalised float32 vectors (dim 1024) are written to ``.npy`` shards, with a planted
set of target rows that are noisy copies of source rows (cosine about 0.9), so mining has
something to find. Each case runs in its own process so its peak RSS (ru_maxrss) is its own:

- ``matmul``: the baseline, whole arrays in memory, one similarity matrix, ``topk`` both ways.
- ``block``: the same size through ``knn_shard_pair`` (exact, blockwise, bounded memory).

The large sizes (IVF indexes, shard grid, recall against exact search) are measured by
``bench_mine_scale.py``.

Usage: python benchmarks/bench_mine.py [--n-small 20000] [--dim 1024]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_unit_rows(
    path: Path, *, n: int, dim: int, seed: int, planted: dict[int, np.ndarray] | None = None
):
    """Write n random unit rows block by block; ``planted`` maps row -> vector to put there."""
    rng = np.random.default_rng(seed)
    header = {"descr": "<f4", "fortran_order": False, "shape": (n, dim)}
    with open(path, "wb") as out:
        np.lib.format.write_array_header_1_0(out, header)
        for a in range(0, n, 8192):
            block = rng.standard_normal((min(8192, n - a), dim), dtype=np.float32)
            for row in range(a, a + len(block)):
                if planted and row in planted:
                    block[row - a] = planted[row]
            block /= np.linalg.norm(block, axis=1, keepdims=True)
            out.write(block.tobytes())


def make_data(out_dir: Path, *, n: int, dim: int, n_planted: int, seed: int = 0) -> dict:
    """``src.npy``, ``tgt.npy`` and the planted (src, tgt) pairs."""
    from psp.mine.shards import EmbeddingShard

    rng = np.random.default_rng(seed)
    write_unit_rows(out_dir / "src.npy", n=n, dim=dim, seed=seed + 1)
    src_ids = np.sort(rng.choice(n, n_planted, replace=False))
    tgt_ids = rng.choice(n, n_planted, replace=False)
    src_rows = EmbeddingShard(out_dir / "src.npy").take(src_ids)
    noise = rng.standard_normal(src_rows.shape, dtype=np.float32)
    noise *= 0.5 / np.linalg.norm(noise, axis=1, keepdims=True)
    planted = dict(zip(tgt_ids.tolist(), src_rows + noise, strict=True))
    write_unit_rows(out_dir / "tgt.npy", n=n, dim=dim, seed=seed + 2, planted=planted)
    pairs = sorted(zip(src_ids.tolist(), tgt_ids.tolist(), strict=True))
    (out_dir / "planted.json").write_text(json.dumps(pairs))
    return {"n": n, "dim": dim, "planted": n_planted}


def case_matmul(d: Path, k: int) -> dict:
    import torch

    t0 = time.perf_counter()
    x = torch.from_numpy(np.load(d / "src.npy"))
    y = torch.from_numpy(np.load(d / "tgt.npy"))
    sim = x @ y.T
    fwd = torch.topk(sim, k, dim=1)
    bwd = torch.topk(sim.T, k, dim=1)
    seconds = time.perf_counter() - t0
    np.savez(d / "matmul.npz", fwd_I=fwd.indices.numpy(), bwd_I=bwd.indices.numpy())
    return {"seconds": seconds}


def case_block(d: Path, k: int, block_size: int) -> dict:
    from psp.mine.knn import knn_shard_pair
    from psp.mine.plan import write_sharded_text
    from psp.mine.reduce import read_direction

    n = len(np.load(d / "src.npy", mmap_mode="r"))
    plan = write_sharded_text(
        (str(i) for i in range(n)), n, n_shards=1, out_text=d / "t.txt.gz", out_plan=d / "t.json"
    )
    t0 = time.perf_counter()
    knn_shard_pair(
        src_npy=d / "src.npy",
        tgt_npy=d / "tgt.npy",
        src_plan=plan,
        tgt_plan=plan,
        src_shard=0,
        tgt_shard=0,
        k=k,
        out_npz=d / "block.npz",
        block_size=block_size,
    )
    seconds = time.perf_counter() - t0
    fwd, bwd = (read_direction(d / "block.npz", name) for name in ("fwd", "bwd"))
    with np.load(d / "matmul.npz") as ref:
        same = float(np.mean(np.sort(fwd[1], 1) == np.sort(ref["fwd_I"], 1)))
        same_bwd = float(np.mean(np.sort(bwd[1], 1) == np.sort(ref["bwd_I"], 1)))
    return {"seconds": seconds, "same_ids_as_matmul_fwd": same, "same_ids_as_matmul_bwd": same_bwd}


def run_case(args: argparse.Namespace, case: str, data_dir: Path) -> dict:
    """Run one case in a fresh interpreter and return its JSON line (with peak RSS)."""
    cmd = [sys.executable, __file__, "--case", case, "--data-dir", str(data_dir)]
    cmd += ["--k", str(args.k), "--block-size", str(args.block_size)]
    result = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def child(args: argparse.Namespace) -> None:
    import psp.mine  # noqa: F401  (import cost is part of every case, measured alone by "idle")

    d = Path(args.data_dir)
    cases = {
        "idle": lambda: {"seconds": 0.0},
        "matmul": lambda: case_matmul(d, args.k),
        "block": lambda: case_block(d, args.k, args.block_size),
    }
    out = cases[args.case]()
    print(json.dumps({**out, "peak_rss_mib": peak_rss_mib()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-small", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--block-size", type=int, default=4096)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        return child(args)
    with tempfile.TemporaryDirectory(prefix="bench-mine-") as tmp:
        small = Path(tmp)
        t0 = time.perf_counter()
        make_data(small, n=args.n_small, dim=args.dim, n_planted=max(1, args.n_small // 100))
        print(
            f"data {args.n_small:,} x {args.n_small:,}, dim {args.dim}: {time.perf_counter() - t0:.1f} s"
        )
        idle = run_case(args, "idle", small)
        matmul = run_case(args, "matmul", small)
        block = run_case(args, "block", small)
        base = idle["peak_rss_mib"]
        print(f"interpreter + torch + faiss alone: {base:.0f} MiB peak RSS")
        for name, r in (
            ("all-pairs matmul", matmul),
            (f"block path (block {args.block_size})", block),
        ):
            print(
                f"{name:>28}: {r['seconds']:7.1f} s, peak RSS {r['peak_rss_mib']:6.0f} MiB (+{r['peak_rss_mib'] - base:.0f})"
            )
        print(
            f"block/matmul: time x{block['seconds'] / matmul['seconds']:.2f}, "
            f"extra RSS x{(block['peak_rss_mib'] - base) / (matmul['peak_rss_mib'] - base):.3f}; "
            f"same neighbours fwd {block['same_ids_as_matmul_fwd']:.4f}, bwd {block['same_ids_as_matmul_bwd']:.4f}"
        )


if __name__ == "__main__":
    main()
