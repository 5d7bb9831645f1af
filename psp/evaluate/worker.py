"""One encoder timed in a fresh process pinned to a number of threads: Table 5's measurement.

Each encoder x thread setting runs in its own interpreter (:data:`WORKER`), so its peak RSS is
its own and not the high-water mark of whatever loaded before it, and its load time is a cold
load from disk (the encoder's library is imported first: the time is the model's). The
sentences are embedded twice and the second pass timed: what an encoder does in a long job,
its caches warm (ours of words, the tokenizers' of theirs); the first pass's rate is kept too.
The memory an encoder costs is its process's peak less what it held before importing the
encoder's library and less one output matrix (the caller's, not the encoder's). The worker
runs on ``THREADS`` CPUs (its affinity, set before anything is imported: a library that sizes
its pool by the CPUs it may use, as model2vec's encode does with joblib above 10,000 sentences,
gets that many), and its thread pools are pinned too, through :data:`THREAD_VARIABLES` and again
after loading with ``torch.set_num_threads`` and threadpoolctl, since a library may create its
pool before reading the variables. "One thread" is then one core, whatever an encoder starts.
The encoder is named by a spec (:mod:`psp.evaluate.peers`), so any encoder the harness can load
is timed the same way: ours, sentence-transformers, model2vec and static peers.

Protocol: ``WORKER SPEC THREADS SENTENCES RESULT_JSON``; the worker writes its figures to
RESULT_JSON and exits 0, or exits :data:`UNAVAILABLE` when the spec's package is missing.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from psp.evaluate.timing import peak_rss_mib, rss_mib, time_embed, timed
from psp.io import read_lines, temp_dir

logger = logging.getLogger(__name__)

#: Every thread pool a worker's libraries may start: OpenMP/BLAS (torch, numpy) and rayon
#: (the Rust tokenizers behind sentence-transformers and model2vec).
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "RAYON_NUM_THREADS",
)
#: A fresh interpreter running :func:`worker_main` (``-c``, not ``-m``: this module is already
#: imported by the caller, and runpy would warn about running it a second time).
WORKER = [
    sys.executable,
    "-c",
    "import sys; from psp.evaluate.worker import worker_main; sys.exit(worker_main(sys.argv[1:]))",
]
#: Exit status of a worker whose peer package is missing: skipped, not failed.
UNAVAILABLE = 3
WARMUP = 256


def worker(spec: str, threads: int, sentences_path: Path) -> dict:
    """One measurement, in this (fresh) process: load ``spec``, embed the sentences file.

    The caller has set :data:`THREAD_VARIABLES`; torch is pinned only when the encoder loaded
    it (a model2vec peer is not charged for importing it).
    """
    cpus = pin_cpus(threads)
    from threadpoolctl import threadpool_limits

    from psp.evaluate.peers import BACKENDS, load_embedder

    sentences = read_lines(sentences_path)
    start_mib = rss_mib()
    kind = spec.partition(":")[0]
    if kind in BACKENDS:
        try:
            importlib.import_module(BACKENDS[kind])
        except ImportError:
            pass  # load_embedder below says which package is missing
    embedder, load_s, _ = timed(lambda: load_embedder(spec, native_batch=True))
    loaded_mib = rss_mib()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    threadpool_limits(threads)
    vectors, first = time_embed(embedder, sentences, warmup=WARMUP)
    del vectors
    vectors, timing = time_embed(embedder, sentences)
    if vectors.shape[0] != len(sentences):
        raise RuntimeError(f"{spec}: {vectors.shape[0]} vectors for {len(sentences)} sentences")
    peak_mib = peak_rss_mib()
    from psp.model.pooling import default_threads  # after the measurement: not a cost of a peer

    return {
        "sentences": timing.sentences,
        "seconds": timing.wall_s,
        "cpu_s": timing.cpu_s,
        "first_pass_s": first.wall_s,
        "load_s": load_s,
        "peak_rss_mib": peak_mib,
        "start_rss_mib": start_mib,
        "loaded_rss_mib": loaded_mib,
        "encoder_mib": peak_mib - start_mib - vectors.nbytes / 2**20,
        "torch_threads": None if torch is None else torch.get_num_threads(),
        "threads": default_threads(),
        "cpus": cpus,
    }


def pin_cpus(count: int) -> int:
    """Restrict this process to ``count`` of the CPUs it may run on (all of them if fewer);
    returns how many it now has. Where the platform cannot pin, the count is the machine's."""
    if not hasattr(os, "sched_setaffinity"):
        return os.cpu_count() or 1
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[: max(1, count)])
    return len(os.sched_getaffinity(0))


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
