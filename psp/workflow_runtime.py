"""What every workflow script does first: send its output to the rule's log and cap its threads.

Kept in the package so the scripts in ``workflow_scripts/`` stay a few lines over one psp call.
"""

from __future__ import annotations

import logging
import os
import sys


def setup(smk) -> None:
    """Route stderr and logging to ``smk.log[0]`` and limit BLAS/torch/Faiss threads to ``smk.threads``."""
    threads = max(1, int(getattr(smk, "threads", 1)))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    if smk.log:
        stream = open(smk.log[0], "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives for the job
        sys.stderr = stream
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return
    torch.set_num_threads(threads)
