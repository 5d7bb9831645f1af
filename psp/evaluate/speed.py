"""Embedding speed: inside an evaluation, and as the paper's Table 5 (speed against quality).

:class:`TimedEmbedder` wraps the evaluation's own ``embed`` calls: the sentences the STS
evaluators embed anyway are the benchmark, so every model in a report is timed on the same ~25k
English sentences, with the thread count recorded beside the rate (the rate means little
without it).

:func:`measure_speed` is the paper's measurement: English news (120,000 sentences by default,
repeated when the files hold fewer), sorted by length, each encoder in its library's default
batch size, on 1 thread and on all the threads it is given. Every encoder x thread setting runs
in a fresh process (:data:`WORKER`), so its peak RSS is its own and not
the high-water mark of whatever loaded before it, and its load time is a cold load from disk
(the library is imported first: the time is the model's). The thread count is pinned before
anything is imported there: the ``*_NUM_THREADS`` variables, ``torch.set_num_threads`` and
threadpoolctl. A peer whose package is not installed is skipped with a logged note.

    python -m psp.evaluate.speed --data /work/shared/data --model results/models/en \\
        --peer st:all-MiniLM-L6-v2 --threads 2 --out results/speed
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from psp.evaluate.tables import STS_AVG, tidy_eval_dir
from psp.io import InputError, atomic_open, atomic_path, read_lines, temp_dir

logger = logging.getLogger(__name__)

COLUMNS = (
    "encoder",
    "kind",
    "threads",
    "sentences",
    "sentences_per_s",
    "cpu_s",
    "load_s",
    "peak_rss_mib",
    "sts_avg",
)
#: The English news of the data mirror: newstest, monolingual and the bitexts' English sides.
NEWS_FILES = (
    "mono/en/wmt-newstest-en.txt.gz",
    *(
        f"bitext/{pair}/wmt-newstest.en.gz"
        for pair in ("de-en", "ru-en", "fr-en", "zh-en", "es-en", "tr-en")
    ),
)
#: Every thread pool a worker's libraries may start: OpenMP/BLAS (torch, numpy) and rayon
#: (the Rust tokenizers behind sentence-transformers and model2vec).
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "RAYON_NUM_THREADS",
)
#: A fresh interpreter running :func:`worker_main` (``-c``, not ``-m``: this module is already
#: imported by ``psp.evaluate``, and runpy would warn about running it a second time).
WORKER = [
    sys.executable,
    "-c",
    "import sys; from psp.evaluate.speed import worker_main; sys.exit(worker_main(sys.argv[1:]))",
]
#: Exit status of a worker whose peer package is missing: skipped, not failed.
UNAVAILABLE = 3
WARMUP = 256


def thread_count() -> int:
    """Threads the embedders' math runs on: torch's intra-op pool when torch is loaded."""
    try:
        import torch
    except ImportError:
        return os.cpu_count() or 1
    return torch.get_num_threads()


class TimedEmbedder:
    """Forward ``embed`` to ``embedder`` while adding up sentences and wall-clock seconds."""

    def __init__(self, embedder):
        self.embedder = embedder
        self.sentences = 0
        self.seconds = 0.0

    def embed(self, sentences: list[str]) -> np.ndarray:
        start = time.perf_counter()
        vectors = self.embedder.embed(sentences)
        self.seconds += time.perf_counter() - start
        self.sentences += len(sentences)
        return vectors

    def report(self) -> dict[str, float]:
        """``sentences``, ``seconds``, ``sentences_per_s``, ``threads``, ``cpu_count``."""
        return {
            "sentences": self.sentences,
            "seconds": round(self.seconds, 4),
            "sentences_per_s": self.sentences / self.seconds if self.seconds > 0 else float("nan"),
            "threads": thread_count(),
            "cpu_count": os.cpu_count() or 1,
        }


def speed_sentences(files: Sequence[str | os.PathLike], n: int) -> list[str]:
    """``n`` sentences from ``files``, shortest first.

    Distinct non-empty lines in file order, cut to ``n`` or repeated up to it, then sorted by
    length in characters (stable), as the paper batches: similar lengths share a batch, so
    padded encoders waste little.
    """
    lines = list(dict.fromkeys(line for path in files for line in read_lines(path) if line))
    if not lines:
        raise InputError(f"no sentences in {', '.join(map(str, files))}")
    repeated = (lines * math.ceil(n / len(lines)))[:n]
    return sorted(repeated, key=len)


def peak_rss_mib() -> float:
    """This process's peak resident set in MiB, from Linux's ``VmHWM``.

    ``VmHWM`` belongs to the process image since its ``exec``; ``ru_maxrss`` would carry over the
    high-water mark of the (large) parent it was forked from.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM line in /proc/self/status: peak RSS is measured on Linux only")


def worker(spec: str, threads: int, sentences_path: Path) -> dict:
    """One measurement, in this (fresh) process: load ``spec``, embed the sentences file.

    The caller has set :data:`THREAD_VARIABLES`; once the model is loaded, torch (when the
    encoder uses it: a model2vec peer is not charged for importing it) and threadpoolctl are
    pinned too, since a library may have created its pool before reading the variables. Peak
    RSS includes the output matrix, as it does for a user of the encoder.
    """
    from threadpoolctl import threadpool_limits

    from psp.evaluate.peers import BACKENDS, load_embedder

    kind = spec.partition(":")[0]
    if kind in BACKENDS:
        try:
            importlib.import_module(BACKENDS[kind])
        except ImportError:
            pass  # load_embedder below says which package is missing
    sentences = read_lines(sentences_path)
    start = time.perf_counter()
    embedder = load_embedder(spec, native_batch=True)
    load_s = time.perf_counter() - start
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    threadpool_limits(threads)
    embedder.embed(sentences[:WARMUP])
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = embedder.embed(sentences)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if vectors.shape[0] != len(sentences):
        raise RuntimeError(f"{spec}: {vectors.shape[0]} vectors for {len(sentences)} sentences")
    return {
        "sentences": len(sentences),
        "seconds": wall,
        "cpu_s": cpu,
        "load_s": load_s,
        "peak_rss_mib": peak_rss_mib(),
        "torch_threads": None if torch is None else torch.get_num_threads(),
    }


def run_worker(spec: str, threads: int, sentences_path: Path) -> dict | None:
    """:func:`worker` in a fresh process pinned to ``threads``; ``None`` when the peer's package
    is missing (logged). Any other failure raises with the worker's stderr."""
    env = os.environ | {var: str(threads) for var in THREAD_VARIABLES}
    env["TOKENIZERS_PARALLELISM"] = "true" if threads > 1 else "false"
    with temp_dir("psp-speed") as tmp:
        result = tmp / "result.json"
        done = subprocess.run(
            [*WORKER, spec, str(threads), str(sentences_path), str(result)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if done.returncode == UNAVAILABLE:
            logger.warning("skipping %s: %s", spec, done.stderr.strip().splitlines()[-1])
            return None
        if done.returncode != 0:
            raise RuntimeError(
                f"speed worker for {spec} ({threads} threads) failed:\n{done.stderr}"
            )
        return json.loads(result.read_text(encoding="utf-8"))


def sts_average(eval_dir: str | os.PathLike | None) -> float | None:
    """The STS 2012-16 average (Pearson x 100) of an evaluation directory, or ``None`` when the
    encoder was not evaluated on STS. Read through the report's tidy reader, so the plot's
    quality axis is the figure Table 2 prints."""
    if eval_dir is None or not Path(eval_dir).is_dir():
        return None
    scores = tidy_eval_dir(eval_dir, model=Path(eval_dir).name)
    found = scores.loc[
        (scores["benchmark"] == STS_AVG)
        & (scores["task"] == "mean")
        & (scores["metric"] == "pearson"),
        "value",
    ]
    return float(found.iloc[0]) if len(found) else None


def measure_speed(
    encoders: Sequence[dict],
    sentences: Sequence[str],
    threads: int,
    out_csv: str | os.PathLike,
    plot: str | os.PathLike | None = None,
) -> list[dict]:
    """Time every encoder on 1 thread and on ``threads``; write the CSV (and the plot).

    ``encoders``: dicts with ``encoder`` (label), ``kind`` (``psp`` or ``peer``), ``spec``
    (:mod:`psp.evaluate.peers`) and ``eval_dir`` (its evaluation, or ``None``). Rows follow
    :data:`COLUMNS`; ``sts_avg`` is empty for an encoder that was not evaluated.
    """
    settings = sorted({1, max(1, int(threads))})
    rows = []
    with temp_dir("psp-speed") as tmp:
        sentences_path = tmp / "sentences.txt"
        sentences_path.write_text("".join(f"{s}\n" for s in sentences), encoding="utf-8")
        for encoder in encoders:
            quality = sts_average(encoder.get("eval_dir"))
            for n_threads in settings:
                logger.info("speed: %s on %d thread(s)", encoder["encoder"], n_threads)
                found = run_worker(encoder["spec"], n_threads, sentences_path)
                if found is None:
                    break
                row = {
                    "encoder": encoder["encoder"],
                    "kind": encoder["kind"],
                    "threads": n_threads,
                    "sentences": found["sentences"],
                    "sentences_per_s": round(found["sentences"] / found["seconds"], 1),
                    "cpu_s": round(found["cpu_s"], 3),
                    "load_s": round(found["load_s"], 3),
                    "peak_rss_mib": round(found["peak_rss_mib"], 1),
                    "sts_avg": "" if quality is None else round(quality, 2),
                }
                # Logged as measured: on a long run, what is done is known before the CSV.
                logger.info("speed: %s", row)
                rows.append(row)
    write_csv(out_csv, rows)
    if plot is not None:
        plot_speed_quality(rows, plot)
    return rows


def write_csv(path: str | os.PathLike, rows: Sequence[dict]) -> None:
    with atomic_open(path, "wt") as handle:
        writer = csv.DictWriter(handle, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def plot_speed_quality(rows: Sequence[dict], path: str | os.PathLike) -> None:
    """Sentences/s (log x) against STS average (y), marker area by peak memory, one labelled
    point per encoder and thread setting. Encoders without an STS average go on a strip of
    their own below, so they are shown without inventing a score. Rows may be read back from
    the CSV (strings)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    unscored = [row for row in rows if row["sts_avg"] == ""]
    if unscored:
        fig, (ax, strip) = plt.subplots(
            2, 1, figsize=(9, 7), sharex=True, gridspec_kw={"height_ratios": [4, 1]}
        )
        strip.set_yticks([])
        strip.set_ylabel("no STS\nscore")
        strip.set_xlabel("sentences / s (log scale)")
        strip.margins(y=1.5)
    else:
        fig, ax = plt.subplots(figsize=(9, 6))
        ax.set_xlabel("sentences / s (log scale)")
    scale = 800 / max((float(r["peak_rss_mib"]) for r in rows), default=1)
    for row in rows:
        mib = float(row["peak_rss_mib"])
        x, size = float(row["sentences_per_s"]), 40 + mib * scale
        color = "tab:blue" if row["kind"] == "psp" else "tab:orange"
        target, y = (strip, 0.0) if row["sts_avg"] == "" else (ax, float(row["sts_avg"]))
        target.scatter(x, y, s=size, color=color, alpha=0.6, edgecolors=color)
        # One thread's label above the marker, more threads' below: the settings of one
        # encoder often land on top of each other.
        above = int(row["threads"]) == 1
        radius = size**0.5 / 2 + 2
        target.annotate(
            f"{row['encoder']} ({row['threads']}t, {mib:.0f} MiB)",
            (x, y),
            xytext=(0, radius if above else -radius),
            textcoords="offset points",
            fontsize=7,
            ha="center",
            va="bottom" if above else "top",
        )
    ax.set_xscale("log")
    ax.margins(x=0.25, y=0.2)
    ax.set_ylabel("STS 2012-16 average (Pearson r x 100)")
    n = int(rows[0]["sentences"]) if rows else 0
    ax.set_title(f"Speed and quality ({n:,} news sentences; marker area: peak RSS)")
    for axis in fig.axes:
        axis.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def encoder_table(
    models: Sequence[str], peers: Sequence[str], eval_root: str | os.PathLike
) -> list[dict]:
    """The encoders of a run: our model directories (label: the directory name, evaluation
    ``{eval_root}/{label}``), then peer specs (evaluation ``{eval_root}/peers/{label}``)."""
    from psp.evaluate.peers import spec_label

    eval_root = Path(eval_root)
    table = []
    for model in models:
        label = Path(model).name
        spec = f"psp:{model}"
        table.append({"encoder": label, "kind": "psp", "spec": spec, "eval_dir": eval_root / label})
    for spec in peers:
        label = spec_label(spec)
        table.append(
            {
                "encoder": label,
                "kind": "peer",
                "spec": spec,
                "eval_dir": eval_root / "peers" / label,
            }
        )
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Table 5: sentences/s, load time, peak RSS.")
    parser.add_argument("--data", type=Path, required=True, help="the data mirror's root")
    parser.add_argument("--model", action="append", default=[], help="our model directory")
    parser.add_argument("--peer", action="append", default=[], help="a peer spec, e.g. st:NAME")
    parser.add_argument("--eval-root", type=Path, default=Path("results/eval"))
    parser.add_argument("--sentences", type=int, default=120_000)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("results/speed"))
    args = parser.parse_args(argv)
    if not args.model and not args.peer:
        parser.error("nothing to measure: give --model and/or --peer")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sentences = speed_sentences([args.data / name for name in NEWS_FILES], args.sentences)
    rows = measure_speed(
        encoder_table(args.model, args.peer, args.eval_root),
        sentences,
        args.threads,
        args.out / "speed.csv",
        args.out / "speed_quality.png",
    )
    csv.DictWriter(sys.stdout, COLUMNS, lineterminator="\n").writerows(rows)
    return 0


def worker_main(argv: Sequence[str]) -> int:
    """``SPEC THREADS SENTENCES RESULT_JSON``: :func:`worker`'s figures as JSON in RESULT_JSON;
    exit status :data:`UNAVAILABLE` when the spec's package is missing."""
    from psp.evaluate.peers import PeerUnavailable

    spec, threads, sentences_path, result = argv
    try:
        found = worker(spec, int(threads), Path(sentences_path))
    except PeerUnavailable as err:
        print(err, file=sys.stderr)
        return UNAVAILABLE
    Path(result).write_text(json.dumps(found), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
