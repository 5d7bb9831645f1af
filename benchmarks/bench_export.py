"""Exported models against ``psp embed``: piece ids, cosines and speed, per trained model.

For each model directory: export it to sentence-transformers and to model2vec (``psp export``),
then

- ids: the rebuilt tokenizer's ids against SentencePiece's on every STS-B and Tatoeba line of
  the mirror in the model's languages (:func:`psp.export.check.mirror_lines`), with every
  differing line listed;
- cosines: ``SentenceTransformer(dir).encode`` and ``StaticModel.from_pretrained(dir).encode``
  against ``psp embed``'s rows on the same lines (minimum, lines below 0.9999, rows psp leaves
  at zero, the norm ratio);
- speed: Table 5's measurement (:func:`psp.evaluate.speed.run_worker`: a fresh process per
  encoder and thread count, load excluded, 256 sentences of warm-up) on the news sentences,
  for ``psp:DIR`` (our model as Table 5 times it), ``st:EXPORT`` and ``m2v:EXPORT``, on 1
  thread and on ``--threads``; and ``psp embed`` as a whole process (start-up, load, reading
  and writing included) on the same file and threads.

    python benchmarks/bench_export.py --model results/models/en --model results/models/es-en \\
        [--data ../shared/data] [--sentences 120000] [--threads 2] [--out bench_export.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from psp.evaluate.speed import NEWS_FILES, run_worker, speed_sentences
from psp.export import export_model
from psp.export.check import compare_ids, compare_vectors, mirror_lines, psp_vectors
from psp.export.tokenizer import build_tokenizer
from psp.model.pooling import load_table_model

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from psp.cli import main; sys.exit(main())"]


def library_vectors(st_dir: Path, m2v_dir: Path, lines: list[str]) -> dict[str, np.ndarray]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

    return {
        "sentence-transformers": SentenceTransformer(str(st_dir), device="cpu").encode(lines),
        "model2vec": StaticModel.from_pretrained(m2v_dir).encode(lines),
    }


def psp_embed_process(model: Path, sentences: Path, threads: int, out: Path) -> dict:
    """``psp embed`` as a whole process: wall seconds and CPU seconds (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [*CLI, "embed", "--model", str(model), "--input", str(sentences), "--output", str(out)]
        + ["--threads", str(threads)],
        check=True,
        stderr=subprocess.DEVNULL,
        env=os.environ | {"OMP_NUM_THREADS": str(threads)},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}


def speed_rows(specs: dict[str, str], sentences: Path, threads: int) -> list[dict]:
    rows = []
    for label, spec in specs.items():
        for n in sorted({1, threads}):
            found = run_worker(spec, n, sentences)
            rows.append(
                {
                    "encoder": label,
                    "threads": n,
                    "sentences_per_s": round(found["sentences"] / found["seconds"], 1),
                    "cpu_s": round(found["cpu_s"], 3),
                    "load_s": round(found["load_s"], 3),
                    "peak_rss_mib": round(found["peak_rss_mib"], 1),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def bench_model(model: Path, *, data: Path, news: Path | None, threads: int, tmp: Path) -> dict:
    config = load_table_model(model).config
    languages = list(dict.fromkeys(config.languages))
    st_dir = export_model(model, tmp / f"{model.name}-st", library="sentence-transformers")
    m2v_dir = export_model(model, tmp / f"{model.name}-m2v", library="model2vec")
    lines = mirror_lines(data, languages)
    tokenizer = build_tokenizer(
        (model / "sentencepiece.model").read_bytes(), lowercase=config.lowercase
    )
    ids = compare_ids(model, tokenizer, lines)
    reference = psp_vectors(model, lines)
    cosines = {
        library: compare_vectors(reference, np.asarray(vectors, dtype=np.float32), lines)
        for library, vectors in library_vectors(st_dir, m2v_dir, lines).items()
    }
    found = {"model": str(model), "languages": languages, "ids": ids, "cosines": cosines}
    if news is None:
        return found
    specs = {
        "psp": f"psp:{model}",
        "sentence-transformers": f"st:{st_dir}",
        "model2vec": f"m2v:{m2v_dir}",
    }
    process = {
        n: psp_embed_process(model, news, n, tmp / "embed.npy") for n in sorted({1, threads})
    }
    return found | {"speed": speed_rows(specs, news, threads), "psp_embed_process": process}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", type=Path, required=True)
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(os.environ.get("PSP_SHARED_DATA", REPO.parent / "shared/data")),
    )
    parser.add_argument("--sentences", type=int, default=120_000)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("bench_export.json"))
    parser.add_argument(
        "--speed-model", action="append", default=None, help="time only these (default: all)"
    )
    args = parser.parse_args()
    news_lines = speed_sentences([args.data / name for name in NEWS_FILES], args.sentences)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
        news = Path(tmp) / "news.txt"
        news.write_text("".join(f"{s}\n" for s in news_lines), encoding="utf-8")
        for model in args.model:
            timed = args.speed_model is None or model.name in args.speed_model
            found = bench_model(
                model,
                data=args.data,
                news=news if timed else None,
                threads=args.threads,
                tmp=Path(tmp),
            )
            ids, cos = found["ids"], found["cosines"]
            print(
                f"{model.name}: ids identical on {ids['identical']}/{ids['lines']} lines "
                f"({100 * ids['share']:.3f} %); min cosine "
                + ", ".join(f"{lib} {c['min_cosine']:.7f}" for lib, c in cos.items()),
                flush=True,
            )
            results.append(found)
    args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
