"""Recall of list-major IVF search against exact search on real sentence embeddings.

The synthetic benchmark (``bench_mine_scale.py``) draws both sides around one mean; real
embeddings of two languages are not so kind: each language sits around its own mean, and a
quantizer trained on both sides then has lists that hold mostly one language. This benchmark
embeds every line of the mirror's es-en text (the comparable Quijote, the es-en bitext sets,
English news) with a trained model and compares, per setting, the IVF search (the library's
``train_index``/``fill_index``/``ivf_knn_both_directions``, in this process) with exact search:

- recall@k of each direction against exact search over all rows (every row a query);
- the share of the exactly mined pairs (margin, retrieval, threshold) that IVF mining keeps;
- the kNN's row pairs compared against what equal lists would need (``n_es · n_en · 2 nprobe /
  nlist`` for ``--compare own_list``, ``· nprobe² / nlist`` for ``common_list``, at the nominal
  ``nlist``).

Printed: one JSON line per setting. Embeddings and the exact kNN are cached in ``--work``.

Usage:
    python benchmarks/bench_mine_real.py --mirror /work/shared/data \\
        --model results/models/es-en --work /tmp/real --nprobe 16 64
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import time
from pathlib import Path

import numpy as np

SIDES = {
    "es": ["mono/comparable-quijote/quijote.es.txt.gz", "bitext/es-en/*.es.gz"],
    "en": [
        "mono/comparable-quijote/quijote.en.txt.gz",
        "bitext/es-en/*.en.gz",
        "mono/en/wmt-newstest-en.txt.gz",
    ],
}


def read_side(mirror: Path, patterns: list[str]) -> list[str]:
    """Every non-blank line of the side's files, in file order."""
    lines = []
    for pattern in patterns:
        paths = sorted(mirror.glob(pattern))
        if not paths:
            raise SystemExit(f"{mirror / pattern}: no such file in the mirror")
        for path in paths:
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                lines += [line.strip() for line in handle if line.strip()]
    return lines


def embeddings(args) -> dict[str, Path]:
    """Each side's unit-norm float32 embeddings as ``.npy`` in ``--work`` (computed once)."""
    paths = {side: args.work / f"{side}.npy" for side in SIDES}
    if all(path.exists() for path in paths.values()):
        return paths
    from psp.model.torch_model import load

    model = load(args.model)
    for side, patterns in SIDES.items():
        vectors = model.embed(read_side(args.mirror, patterns), normalize=True)
        np.save(paths[side], np.ascontiguousarray(vectors, dtype=np.float32))
    return paths


def exact(args, paths: dict[str, Path]) -> tuple:
    """Exact top-k both directions (cached in ``--work``)."""
    from psp.mine.knn import knn_both_directions

    cache = args.work / f"exact.k{args.k}.npz"
    if not cache.exists():
        src, tgt = np.load(paths["es"]), np.load(paths["en"])
        (fd, fi), (bd, bi) = knn_both_directions(src, tgt, args.k)
        np.savez(cache, fd=fd, fi=fi, bd=bd, bi=bi)
    with np.load(cache) as z:
        return (z["fd"], z["fi"]), (z["bd"], z["bi"])


def recall(approx: np.ndarray, truth: np.ndarray) -> float:
    """Mean share of each row's exact top-k found in its approximate top-k."""
    hits = (approx[:, :, None] == truth[:, None, :]).any(axis=1)
    return float(hits.mean())


def mined(fwd, bwd, args) -> set:
    from psp.mine.margin import score_pairs

    scores, src, tgt = score_pairs(fwd, bwd, k=args.k, margin_kind="ratio", retrieval="max")
    keep = scores >= args.threshold
    return set(zip(src[keep].tolist(), tgt[keep].tolist(), strict=True))


def run(args, paths, truth, *, nlist: int | None, nprobe: int) -> dict:
    from psp.mine.config import IndexConfig
    from psp.mine.index import fill_index, train_index
    from psp.mine.ivf import compared_pairs, ivf_knn_both_directions

    split = {} if args.list_split is None else {"list_split": args.list_split or None}
    chosen = {} if args.compare is None else {"compare": args.compare}
    cfg = IndexConfig(ivf_min_size=1, nlist=nlist, nprobe=nprobe, **chosen, **split)
    t0 = time.perf_counter()
    trained = args.work / "quantizer.npz"
    centroids, compare = train_index([paths["es"]], [paths["en"]], cfg, trained)
    common = compare == "common_list"
    t1 = time.perf_counter()
    lists = {
        side: fill_index(
            trained,
            paths[side],
            args.work / f"{side}.lists.npz",
            nprobe=nprobe,
        )
        for side in ("es", "en")
    }
    t2 = time.perf_counter()
    src, tgt = np.load(paths["es"]), np.load(paths["en"])
    lists = {side: found.lists for side, found in lists.items()}
    fwd, bwd = ivf_knn_both_directions(
        src, tgt, src_lists=lists["es"], tgt_lists=lists["en"], k=args.k, common_lists=common
    )
    t3 = time.perf_counter()
    nominal = cfg.nlist_for(max(len(src), len(tgt)))
    nlist = len(centroids)  # more than nominal where lists were split
    done = compared_pairs(lists["es"], lists["en"], nlist, common_lists=common)
    # equal lists at the nominal nlist
    balanced = len(src) * len(tgt) * (nprobe**2 if common else 2 * nprobe) / nominal
    exact_pairs, ivf_pairs = mined(*truth, args), mined(fwd, bwd, args)
    return {
        "n_es": len(src),
        "n_en": len(tgt),
        "index": dataclasses.asdict(cfg) | {"nlist": nlist, "nominal_nlist": nominal},
        "compare": compare,
        "recall_at_k": {
            "es->en": recall(fwd[1], truth[0][1]),
            "en->es": recall(bwd[1], truth[1][1]),
        },
        "recall_at_1": {
            "es->en": float((fwd[1][:, 0] == truth[0][1][:, 0]).mean()),
            "en->es": float((bwd[1][:, 0] == truth[1][1][:, 0]).mean()),
        },
        "exact_mined": len(exact_pairs),
        "exact_mined_kept": len(exact_pairs & ivf_pairs) / max(1, len(exact_pairs)),
        "ivf_mined_others": len(ivf_pairs - exact_pairs),
        "knn_rows_compared": done,
        "knn_vs_balanced": done / balanced,
        "seconds": {"train": t1 - t0, "assign": t2 - t1, "knn": t3 - t2},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, required=True, help="the data mirror")
    parser.add_argument("--model", type=Path, required=True, help="a trained es-en model dir")
    parser.add_argument(
        "--work", type=Path, required=True, help="cache of embeddings and exact kNN"
    )
    parser.add_argument(
        "--nlist", type=int, nargs="+", default=[None], help="default: the IndexConfig rule"
    )
    parser.add_argument("--nprobe", type=int, nargs="+", default=[16])
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument(
        "--compare",
        choices=["auto", "own_list", "common_list"],
        default=None,
        help="default: IndexConfig's",
    )
    parser.add_argument(
        "--list-split", type=float, default=None, help="default: IndexConfig's; 0: no split"
    )
    parser.add_argument("--threshold", type=float, default=1.2, help="ratio margin cut")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    paths = embeddings(args)
    truth = exact(args, paths)
    for nlist in args.nlist:
        for nprobe in args.nprobe:
            result = run(args, paths, truth, nlist=nlist, nprobe=nprobe)
            print(json.dumps({"nprobe": nprobe} | result), flush=True)


if __name__ == "__main__":
    main()
