"""Mining at scale on one machine: N x N vectors through the workflow's shard/index/kNN/reduce jobs.

Each side is written as the workflow writes it (a sharded text with its shard plan, one
L2-normalised ``.npy`` per shard, float16 or float32, as ``embed_shard`` would), then every job of
the workflow's DAG runs in its own process, calling the same function its rule script calls:
``train_index`` per pair, ``index_shard`` (``fill_index``) per shard, ``knn_shard_pair`` per
shard pair, ``score_mined`` (``reduce_parts`` + ``write_mined``). Stage after stage, each job gets
its rule's ``threads:`` and as many run at once as Snakemake runs with ``--cores`` (the machine's
cores by default). Each job's wall time, CPU time and peak RSS (``ru_maxrss`` of that process)
are recorded.

The vectors have the structure real sentence embeddings have, not uniform noise (the worst case
for an inverted file): a shared mean direction (every sentence embedding leans the same way),
topics (cluster centres shared by both sides, so translations fall in the same region) and an
anisotropic spectrum (variance decaying as a power law over dimensions). A share of target rows
are noisy copies of source rows (cosine about 0.85): the planted translations.

Printed, as one JSON line:
- wall and CPU seconds per stage and in total (the vector generation that stands in for
  ``embed_shard`` is reported apart), peak RSS per job kind;
- recall@k of the approximate search against exact search, both directions, on random samples
  of queries searched exhaustively over the whole other side;
- the share of planted pairs among the mined pairs (after margin scoring and the threshold);
- the exact path's speed as a share of the machine's raw matrix-product rate (same shapes).

Usage:
    python benchmarks/bench_mine_scale.py                 # 1,000,000 x 1,000,000, dim 1024
    python benchmarks/bench_mine_scale.py --n 100000      # the CI-size check (< 1 minute)
    python benchmarks/bench_mine_scale.py --nprobe 4 8 16 # trade-off: recall and time per nprobe
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHARD_ROWS = 250_000  # 1 GB of float32 at dim 1024: what one kNN job streams per side


# ---- data -----------------------------------------------------------------------------------


def spectrum(dim: int, alpha: float = 0.5) -> np.ndarray:
    """Per-dimension standard deviations decaying as ``(i+1)^-alpha``, total variance 1."""
    s = (np.arange(dim) + 1.0) ** -alpha
    return (s / np.linalg.norm(s)).astype(np.float32)


class Corpus:
    """Deterministic generator of one side's rows (topics and the mean direction are shared)."""

    def __init__(self, n: int, dim: int, n_topics: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.n, self.dim, self.scale = n, dim, spectrum(dim)
        self.mean = 0.6 * rng.standard_normal(dim).astype(np.float32) * self.scale
        self.topics = (1.0 * rng.standard_normal((n_topics, dim)).astype(np.float32)) * self.scale

    def rows(self, rng: np.random.Generator, count: int) -> np.ndarray:
        topic = self.topics[rng.integers(0, len(self.topics), count)]
        noise = 0.8 * rng.standard_normal((count, self.dim), dtype=np.float32) * self.scale
        return self.mean + topic + noise


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def write_side(
    corpus: Corpus, side: str, *, n_shards: int, out: Path, seed: int, float16: bool, planted=None
):
    """Shards of unit rows ``out/{side}.{s}.npy`` (float16 or float32, as ``embed_shard`` writes
    them with the mining key ``float16``) plus the side's sharded text and plan."""
    from psp.mine.plan import write_sharded_text

    plan = write_sharded_text(
        (f"{side} sentence {i}" for i in range(corpus.n)),
        corpus.n,
        n_shards=n_shards,
        out_text=out / f"{side}.txt.gz",
        out_plan=out / f"{side}.plan.json",
    )
    rng = np.random.default_rng(seed)
    dtype = np.dtype(np.float16 if float16 else np.float32)
    for s, entry in enumerate(plan.shards):
        header = {"descr": dtype.str, "fortran_order": False, "shape": (entry.rows, corpus.dim)}
        with open(out / f"{side}.{s}.npy", "wb") as handle:
            np.lib.format.write_array_header_1_0(handle, header)
            for a in range(entry.start, entry.stop, 32768):
                b = min(a + 32768, entry.stop)
                block = corpus.rows(rng, b - a)
                if planted is not None:
                    planted(block, a, b)
                handle.write(unit(block).astype(dtype).tobytes())
    return plan


def make_data(args, out: Path) -> dict:
    """Both sides; target row ``t`` of the planted set is source row ``src_of[t]`` plus noise."""
    from psp.mine.shards import open_embeddings

    rng = np.random.default_rng(args.seed)
    corpus = Corpus(args.n, args.dim, max(1, args.n // 200), args.seed)
    n_shards = max(1, math.ceil(args.n / args.shard_rows))
    src_plan = write_side(
        corpus, "src", n_shards=n_shards, out=out, seed=args.seed + 1, float16=args.float16
    )
    n_planted = int(args.n * args.planted)
    tgt_rows = np.sort(rng.choice(args.n, n_planted, replace=False))
    src_rows = rng.choice(args.n, n_planted, replace=False)
    shards = [open_embeddings(out / f"src.{s}.npy") for s in range(len(src_plan))]

    def plant(block, a, b):
        lo, hi = np.searchsorted(tgt_rows, [a, b])
        for t, s in zip(tgt_rows[lo:hi], src_rows[lo:hi], strict=True):
            shard = int(np.searchsorted(src_plan.offsets(), s, side="right") - 1)
            source = shards[shard].take([s - src_plan.shards[shard].start])[0]
            noise = rng.standard_normal(args.dim).astype(np.float32) * corpus.scale
            block[t - a] = source + 0.6 * noise / np.linalg.norm(noise * 1.0)

    write_side(
        corpus,
        "tgt",
        n_shards=n_shards,
        out=out,
        seed=args.seed + 2,
        float16=args.float16,
        planted=plant,
    )
    np.savez(out / "planted.npz", src=src_rows, tgt=tgt_rows)
    return {"shards_per_side": n_shards, "planted": n_planted}


# ---- the workflow's jobs, one process each ----------------------------------------------------


def index_config(args, nprobe: int):
    """The defaults of ``IndexConfig``, with what the command line sets."""
    from psp.mine.config import IndexConfig

    given = {"nlist": args.nlist, "train_per_list": args.train_per_list}
    given |= {"train_iters": args.train_iters, "list_split": args.list_split}
    given |= {"compare": args.compare}
    given = {key: value for key, value in given.items() if value is not None}
    if args.list_split == 0:
        given["list_split"] = None
    return IndexConfig(ivf_min_size=args.ivf_min_size, nprobe=nprobe, **given)


#: ``threads:`` of the workflow's rules (rules/mine.smk; a test keeps the two equal; a kNN job's
#: depends on the grid, :func:`psp.workflow.jobs.knn_job_threads`). Snakemake with ``--cores C``
#: gives a job min(threads, C) cores and runs as many jobs at once as fit.
RULE_THREADS = {"train_index": 2, "index_shard": 1, "score_mined": 2}


def job_threads(name: str, cores: int, shards: int) -> int:
    """The cores Snakemake gives job ``name`` of a grid of ``shards`` per side on a machine of
    ``cores`` (all of them for the benchmark's own measuring jobs)."""
    from psp.workflow.jobs import knn_job_threads

    if name == "knn_shard_pair":
        return min(knn_job_threads(shards), cores)
    return min(RULE_THREADS.get(name, cores), cores)


def run_jobs(name: str, out: Path, args, jobs: list[dict]) -> list[dict]:
    """Run ``job_<name>`` once per entry of ``jobs``, each in a fresh process, as many at a time
    as Snakemake would with ``--cores args.cores``; each job's wall time, CPU time and peak RSS.

    CPU time is reported beside wall time because it does not grow when other processes share
    the machine: CPU seconds / threads is the wall time the job takes on cores of its own.
    """
    shards = len(json.loads((out / "src.plan.json").read_text())["shards"])
    threads = job_threads(name, args.cores, shards)
    at_once = max(1, args.cores // threads)
    pending, running, results = list(enumerate(jobs)), {}, [None] * len(jobs)
    while pending or running:
        while pending and len(running) < at_once:
            number, params = pending.pop(0)
            cmd = [sys.executable, __file__, "--job", name, "--dir", str(out), "--params"]
            cmd += [json.dumps(params | {"threads": threads, "args": vars(args)}, default=str)]
            proc = subprocess.Popen(cmd)
            # the Popen is kept: one collected while its child runs is reaped by the next Popen
            running[proc.pid] = (proc, number, params, time.perf_counter())
        pid, status, usage = os.wait4(-1, 0)
        proc, number, params, t0 = running.pop(pid)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if status != 0:
            raise SystemExit(f"job {name} {params} failed with status {status}")
        results[number] = {
            "seconds": time.perf_counter() - t0,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "rss_mib": usage.ru_maxrss / 1024,
        }
    return results


def run_job(name: str, out: Path, args, **params) -> dict:
    """One job of ``name`` (see :func:`run_jobs`)."""
    return run_jobs(name, out, args, [params])[0]


def job_train_index(out: Path, args, n_shards: int, nprobe: int):
    from psp.mine.index import train_index

    src, tgt = ([out / f"{side}.{s}.npy" for s in range(n_shards)] for side in ("src", "tgt"))
    train_index(src, tgt, index_config(args, nprobe), out / "quantizer.npz")


def job_index_shard(out: Path, args, *, side: str, shard: int, nprobe: int):
    from psp.mine.index import fill_index

    fill_index(
        out / "quantizer.npz",
        out / f"{side}.{shard}.npy",
        out / f"{side}.{shard}.{nprobe}.lists.npz",
        nprobe=nprobe,
    )


def job_knn_shard_pair(out: Path, args, *, src_shard: int, tgt_shard: int, nprobe: int, ivf: bool):
    from psp.mine.index import load_lists
    from psp.mine.knn import knn_shard_pair
    from psp.mine.plan import load_plan

    src_lists = tgt_lists = None
    if ivf:
        src_lists, tgt_lists = (
            load_lists(out / f"{side}.{shard}.{nprobe}.lists.npz")
            for side, shard in (("src", src_shard), ("tgt", tgt_shard))
        )
    knn_shard_pair(
        src_npy=out / f"src.{src_shard}.npy",
        tgt_npy=out / f"tgt.{tgt_shard}.npy",
        src_plan=load_plan(out / "src.plan.json"),
        tgt_plan=load_plan(out / "tgt.plan.json"),
        src_shard=src_shard,
        tgt_shard=tgt_shard,
        k=args.k,
        out_npz=out / f"knn.{nprobe}.{src_shard}.{tgt_shard}.npz",
        src_lists=src_lists,
        tgt_lists=tgt_lists,
    )


def job_score_mined(out: Path, args, n_shards: int, nprobe: int):
    from psp.mine.config import MineConfig, PairFilterConfig
    from psp.mine.output import write_mined
    from psp.mine.plan import load_plan
    from psp.mine.reduce import reduce_parts

    # No pair filters: the synthetic sides' texts ("src sentence 17") differ only in digits,
    # which the repeated-pair filter normalises away, so it would keep one pair of them all.
    cfg = MineConfig(k=args.k, threshold=args.threshold, filters=PairFilterConfig.none())
    src_plan, tgt_plan = load_plan(out / "src.plan.json"), load_plan(out / "tgt.plan.json")
    parts = [out / f"knn.{nprobe}.{s}.{t}.npz" for s in range(n_shards) for t in range(n_shards)]
    fwd, bwd = reduce_parts(parts, args.k, src_plan, tgt_plan)
    np.savez(out / f"reduced.{nprobe}.npz", fwd_I=fwd[1], bwd_I=bwd[1])
    write_mined(
        out / "src.txt.gz",
        out / "tgt.txt.gz",
        fwd=fwd,
        bwd=bwd,
        cfg=cfg,
        out_path=out / f"mined.{nprobe}.tsv.gz",
        stats_json=out / f"mined.{nprobe}.stats.json",
        histogram_png=out / f"mined.{nprobe}.png",
    )


def job_exact_sample(out: Path, args, *, n_shards: int, side: str, nprobe: int):
    """Exact top-k of a random sample of ``side`` rows over every shard of the other side."""
    import torch

    from psp.mine.shards import open_embeddings

    other = "tgt" if side == "src" else "src"
    rows = np.sort(np.random.default_rng(7).choice(args.n, args.recall_queries, replace=False))
    bounds = np.cumsum(
        [0] + [len(open_embeddings(out / f"{side}.{s}.npy")) for s in range(n_shards)]
    )
    queries = np.concatenate(
        [
            open_embeddings(out / f"{side}.{s}.npy").take(
                rows[(rows >= bounds[s]) & (rows < bounds[s + 1])] - bounds[s]
            )
            for s in range(n_shards)
        ]
    )
    q = torch.from_numpy(queries)
    best_d = torch.full((len(rows), args.k), -math.inf)
    best_i = torch.full((len(rows), args.k), -1, dtype=torch.int64)
    offset = 0
    for s in range(n_shards):
        shard = open_embeddings(out / f"{other}.{s}.npy")
        for a in range(0, len(shard), 65536):
            sim = q @ torch.from_numpy(shard.rows(a, a + 65536)).T
            d, i = torch.topk(sim, min(args.k, sim.shape[1]), dim=1)
            cat_d, cat_i = torch.cat([best_d, d], 1), torch.cat([best_i, i + offset + a], 1)
            best_d, pos = torch.topk(cat_d, args.k, dim=1)
            best_i = torch.gather(cat_i, 1, pos)
        offset += len(shard)
    np.savez(out / f"exact.{side}.npz", rows=rows, ids=best_i.numpy())


def job_matmul_ratio(out: Path, args, nprobe: int):
    """Exact two-way kNN of two blocks against one raw product of the same shapes."""
    import torch

    from psp.mine.knn import knn_both_directions

    rng = np.random.default_rng(3)
    n = args.ratio_rows
    x = unit(rng.standard_normal((n, args.dim), dtype=np.float32))
    y = unit(rng.standard_normal((n, args.dim), dtype=np.float32))
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    raw, knn = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        for a in range(0, n, 4096):
            for c in range(0, n, 4096):
                tx[a : a + 4096] @ ty[c : c + 4096].T
        raw.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        knn_both_directions(x, y, args.k, 4096)
        knn.append(time.perf_counter() - t0)
    flops = 2.0 * n * n * args.dim
    result = {
        "rows": n,
        "raw_gflops": flops / min(raw) / 1e9,
        "exact_knn_gflops": flops / min(knn) / 1e9,
        "ratio": min(raw) / min(knn),
    }
    (out / "matmul_ratio.json").write_text(json.dumps(result))


# ---- the run -------------------------------------------------------------------------------


def recall(out: Path, side: str, nprobe: int, k: int) -> float:
    exact = np.load(out / f"exact.{side}.npz")
    approx = np.load(out / f"reduced.{nprobe}.npz")[f"{'fwd' if side == 'src' else 'bwd'}_I"]
    got = approx[exact["rows"]]
    return float(
        np.mean([len(set(a) & set(e)) / k for a, e in zip(got, exact["ids"], strict=True)])
    )


def planted_mined(out: Path, nprobe: int) -> float:
    import gzip

    planted = np.load(out / "planted.npz")
    truth = set(zip(planted["src"].tolist(), planted["tgt"].tolist(), strict=True))
    found = 0
    with gzip.open(out / f"mined.{nprobe}.tsv.gz", "rt") as handle:
        for line in handle:
            _, src, tgt = line.rstrip("\n").split("\t")
            found += (int(src.rsplit(" ", 1)[1]), int(tgt.rsplit(" ", 1)[1])) in truth
    return found / max(1, len(truth))


def job_outputs(out: Path, name: str, nprobe: int, params: dict) -> list[Path]:
    """What a job writes, so that ``--resume`` can tell finished jobs from the rest."""
    if name == "train_index":
        return [out / "quantizer.npz"]
    if name == "index_shard":
        return [out / f"{params['side']}.{params['shard']}.{nprobe}.lists.npz"]
    if name == "knn_shard_pair":
        return [out / f"knn.{nprobe}.{params['src_shard']}.{params['tgt_shard']}.npz"]
    return []


def pipeline(out: Path, args, *, n_shards: int, nprobe: int, ivf: bool, trained: bool) -> dict:
    """Every job of the DAG in order; with ``--resume``, jobs whose outputs exist are counted
    in ``reused_jobs`` and not timed, so the figures then cover only the jobs that ran."""
    stages, cpu, rss, reused = {}, {}, {}, {}

    def stage(name, jobs):
        t0 = time.perf_counter()
        todo = []
        for params in jobs:
            outputs = job_outputs(out, name, nprobe, params)
            if args.resume and outputs and all(path.exists() for path in outputs):
                reused[name] = reused.get(name, 0) + 1
            else:
                todo.append(params | {"nprobe": nprobe})
        for result in run_jobs(name, out, args, todo):
            rss[name] = max(rss.get(name, 0.0), result["rss_mib"])
            cpu[name] = cpu.get(name, 0.0) + result["cpu_s"]
        stages[name] = time.perf_counter() - t0

    if ivf:
        if not trained:
            stage("train_index", [{"n_shards": n_shards}])
        stage(
            "index_shard",
            [{"side": side, "shard": s} for side in ("src", "tgt") for s in range(n_shards)],
        )
    grid = [
        {"src_shard": s, "tgt_shard": t, "ivf": ivf}
        for s in range(n_shards)
        for t in range(n_shards)
    ]
    stage("knn_shard_pair", grid)
    stage("score_mined", [{"n_shards": n_shards}])
    return {
        "stages_s": stages,
        "stages_cpu_s": cpu,
        "peak_rss_mib": rss,
        "total_s": sum(stages.values()),
        "total_cpu_s": sum(cpu.values()),
        "reused_jobs": reused,
    }


def main() -> None:
    from psp.mine.config import IndexConfig, MineConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="rows per side")
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--shard-rows", type=int, default=SHARD_ROWS)
    parser.add_argument("--nlist", type=int, default=None, help="default: the IndexConfig rule")
    parser.add_argument("--nprobe", type=int, nargs="+", default=[IndexConfig().nprobe])
    parser.add_argument(
        "--compare",
        choices=["auto", "own_list", "common_list"],
        default=None,
        help="default: IndexConfig's",
    )
    parser.add_argument("--train-per-list", type=int, default=None, help="default: IndexConfig's")
    parser.add_argument("--train-iters", type=int, default=None, help="default: IndexConfig's")
    parser.add_argument(
        "--list-split", type=float, default=None, help="default: IndexConfig's; 0: no split"
    )
    parser.add_argument("--ivf-min-size", type=int, default=1, help="1: always IVF")
    parser.add_argument(
        "--float16",
        action=argparse.BooleanOptionalAction,
        default=MineConfig().float16,
        help="embedding shards in float16 (default: the mining key's default)",
    )
    parser.add_argument("--threshold", type=float, default=1.06)
    parser.add_argument("--planted", type=float, default=0.1, help="share of target rows planted")
    parser.add_argument("--recall-queries", type=int, default=2000)
    parser.add_argument(
        "--ratio-rows", type=int, default=16384, help="0: skip the raw matrix-product rate"
    )
    parser.add_argument(
        "--with-exact", action="store_true", help="also run the exact pipeline (the crossover)"
    )
    parser.add_argument(
        "--cores",
        type=int,
        default=os.cpu_count(),
        help="cores of the machine, as Snakemake's --cores: each job gets its rule's threads",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: a temp dir)")
    parser.add_argument(
        "--resume",
        type=Path,
        default=None,
        help="work folder of an interrupted run (kept, as it was): reuse its data and finished jobs",
    )
    parser.add_argument("--job", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--params", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.job:  # a child process: one job of the DAG
        from psp.workflow.runtime import limit_threads

        params = json.loads(args.params)
        job_args = argparse.Namespace(**params.pop("args"))
        limit_threads(params.pop("threads"))
        globals()[f"job_{args.job}"](args.dir, job_args, **params)
        return

    with contextlib.ExitStack() as stack:
        if args.resume:
            out, generate_s = args.resume, None
            n_shards = len(json.loads((out / "src.plan.json").read_text())["shards"])
        else:
            out = Path(
                stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="bench_mine_scale.", dir=args.dir)
                )
            )
            t0 = time.perf_counter()
            n_shards = make_data(args, out)["shards_per_side"]
            generate_s = time.perf_counter() - t0
        print(json.dumps(measure(out, args, n_shards) | {"generate_s": generate_s}))


def measure(out: Path, args, n_shards: int) -> dict:
    """Every run asked for on the data in ``out``: the JSON report."""
    ivf = args.ivf_min_size <= args.n
    report = {
        "n": args.n,
        "dim": args.dim,
        "cores": args.cores,
        "job_threads": {
            name: job_threads(name, args.cores, n_shards)
            for name in [*RULE_THREADS, "knn_shard_pair"]
        },
        "shards_per_side": n_shards,
        "float16": args.float16,
        "search": "ivf" if ivf else "exact",
        "index": dataclasses.asdict(index_config(args, args.nprobe[0])) if ivf else None,
        "runs": [],
    }
    for side in ("src", "tgt"):
        if not (args.resume and (out / f"exact.{side}.npz").exists()):
            run_job("exact_sample", out, args, n_shards=n_shards, side=side, nprobe=0)
    for number, nprobe in enumerate(args.nprobe if ivf else [0]):
        run = pipeline(out, args, n_shards=n_shards, nprobe=nprobe, ivf=ivf, trained=number > 0)
        run["nprobe"] = nprobe
        if ivf:
            from psp.mine.index import load_quantizer

            run["compare"] = load_quantizer(out / "quantizer.npz")[1]
        run["recall_at_k"] = {side: recall(out, side, nprobe, args.k) for side in ("src", "tgt")}
        run["planted_mined"] = planted_mined(out, nprobe)
        if ivf:
            run["knn_gflop"] = ivf_flop(out, args, n_shards, nprobe) / 1e9
        report["runs"].append(run)
    if ivf and args.with_exact:
        exact = pipeline(out, args, n_shards=n_shards, nprobe=0, ivf=False, trained=True)
        report["exact_run"] = exact | {"planted_mined": planted_mined(out, 0)}
    if args.ratio_rows:
        run_job("matmul_ratio", out, args, nprobe=0)
        report["exact_path_vs_matmul"] = json.loads((out / "matmul_ratio.json").read_text())
        raw = report["exact_path_vs_matmul"]["raw_gflops"]
        for run in report["runs"]:
            rate = run.get("knn_gflop", 0) / run["stages_s"]["knn_shard_pair"]
            run["knn_gflops"], run["knn_vs_matmul"] = rate, rate / raw
    return report


def ivf_flop(out: Path, args, n_shards: int, nprobe: int) -> float:
    """Floating-point operations of the list-major products over the whole grid
    (:func:`psp.mine.ivf.compared_pairs` per shard pair)."""
    from psp.mine.ivf import compared_pairs

    lists = {}
    for side in ("src", "tgt"):
        lists[side] = []
        for s in range(n_shards):
            with np.load(out / f"{side}.{s}.{nprobe}.lists.npz") as z:
                lists[side].append(z["lists"])
                nlist, compare = int(z["nlist"]), str(z["compare"])
    common = compare == "common_list"
    pairs = sum(
        compared_pairs(a, b, nlist, common_lists=common) for a in lists["src"] for b in lists["tgt"]
    )
    return 2.0 * args.dim * float(pairs)


if __name__ == "__main__":
    main()
