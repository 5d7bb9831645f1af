"""Rule scripts obey their `threads:`: Faiss, torch and BLAS in a job use no more threads."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROBE = textwrap.dedent(
    """
    import os, threading, time
    import faiss, numpy as np, torch
    from psp.workflow.runtime import limit_threads

    limit_threads({threads})
    peak = 0

    def watch():
        global peak
        while not done:
            peak = max(peak, len(os.listdir("/proc/self/task")))
            time.sleep(0.002)

    done = False
    rng = np.random.default_rng(0)
    db = rng.standard_normal((20000, 64)).astype("float32")
    index = faiss.IndexFlatIP(64)
    index.add(db)
    baseline = len(os.listdir("/proc/self/task"))
    watcher = threading.Thread(target=watch)
    watcher.start()
    for _ in range(3):
        index.search(db[:4000], 4)  # a Faiss OpenMP parallel region
        torch.from_numpy(db) @ torch.from_numpy(db[:2000]).T
        db[:3000] @ db[:3000].T
    done = True
    watcher.join()
    print(faiss.omp_get_max_threads(), torch.get_num_threads(), peak - baseline - 1)
    """
)


def probe(threads: int) -> list[int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(threads=threads)],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "8"},  # as a node's default would be
    )
    return [int(v) for v in out.stdout.split()]


def test_one_thread_job_runs_faiss_torch_and_blas_on_one_thread():
    faiss_threads, torch_threads, extra = probe(1)
    assert (faiss_threads, torch_threads) == (1, 1)
    assert extra == 0  # no worker thread was started by Faiss, torch or BLAS


def test_the_cap_is_the_rule_threads_not_the_environment():
    faiss_threads, torch_threads, extra = probe(2)
    assert (faiss_threads, torch_threads) == (2, 2)
    assert extra >= 1  # the probe can see worker threads, so the one-thread case is meaningful
