"""Recall@k and speed of IVF indexes (several nprobe) against exact flat search.

Database vectors are drawn around random centres (real sentence embeddings are clustered; purely
uniform vectors are the worst case for an inverted file and are reported too). Queries are
perturbed database vectors. Everything goes through ``psp.mine.index.build_index`` /
``search_index`` as mining uses them.

Usage: python benchmarks/bench_mine_index.py [--n 100000] [--dim 256] [--queries 2000] [--k 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from psp.mine.config import IndexConfig
from psp.mine.index import build_index, search_index


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_data(n: int, dim: int, n_queries: int, clustered: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    if clustered:
        centres = unit(rng.standard_normal((max(1, n // 100), dim)))
        db = unit(centres[rng.integers(0, len(centres), n)] + 0.08 * rng.standard_normal((n, dim)))
    else:
        db = unit(rng.standard_normal((n, dim)))
    queries = unit(
        db[rng.choice(n, n_queries, replace=False)] + 0.05 * rng.standard_normal((n_queries, dim))
    )
    return db, queries


def recall_at_k(approx: np.ndarray, exact: np.ndarray) -> float:
    k = exact.shape[1]
    return float(np.mean([len(set(a) & set(e)) / k for a, e in zip(approx, exact, strict=True)]))


def bench(
    db_path: Path, queries: np.ndarray, k: int, nlist: int, nprobes: list[int], factories: list[str]
):
    t0 = time.perf_counter()
    flat = build_index([db_path], None, IndexConfig(ivf_min_size=10**12))
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, exact = search_index(flat, queries, k)
    t_exact = time.perf_counter() - t0
    qps_exact = len(queries) / t_exact
    print(f"  {'Flat (exact)':<22} build {t_build:6.1f} s  {qps_exact:9.0f} q/s  recall@{k} 1.0000")
    del flat
    for factory in factories:
        cfg = IndexConfig(ivf_min_size=1, factory=factory, nlist=nlist, train_size=40 * nlist)
        t0 = time.perf_counter()
        index = build_index([db_path], None, cfg)
        t_build = time.perf_counter() - t0
        for nprobe in nprobes:
            index.nprobe = nprobe
            t0 = time.perf_counter()
            _, approx = search_index(index, queries, k)
            qps = len(queries) / (time.perf_counter() - t0)
            name = f"{factory.format(nlist=nlist)} np={nprobe}"
            print(
                f"  {name:<22} build {t_build:6.1f} s  {qps:9.0f} q/s  recall@{k} "
                f"{recall_at_k(approx, exact):.4f}  speed-up x{qps / qps_exact:.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--nlist", type=int, default=1024)
    parser.add_argument("--nprobe", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--factory", nargs="+", default=["IVF{nlist},Flat", "IVF{nlist},SQfp16"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        for clustered in (True, False):
            db, queries = make_data(args.n, args.dim, args.queries, clustered)
            path = Path(tmp) / "db.npy"
            np.save(path, db)
            del db
            kind = "clustered" if clustered else "uniform"
            print(f"{kind} data: {args.n:,} x {args.dim}, {args.queries:,} queries, k={args.k}")
            bench(path, queries, args.k, args.nlist, args.nprobe, args.factory)


if __name__ == "__main__":
    main()
