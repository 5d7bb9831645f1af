"""What every workflow script does first: refuse a job whose output is one of its inputs, send
its output to the rule's log, cap its threads, and end a failure a user can act on with one line.

Kept in the package so the scripts in ``workflow_scripts/`` stay a few lines over one psp call.
"""

from __future__ import annotations

import logging
import os
import sys

from psp.io import FileRoles, exit_on_sigterm, failure_message

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def limit_threads(threads: int) -> None:
    """Cap every thread pool of this process at ``threads``: torch, Faiss, BLAS, SentencePiece.

    By the time a rule script runs, Snakemake has imported numpy and the script has imported psp
    (torch, Faiss), so the ``*_NUM_THREADS`` variables come too late for the pools already
    created: each library is told directly. The variables are still set, for child processes.
    SentencePiece follows torch (``psp.model.torch_model`` encodes with
    ``torch.get_num_threads()`` threads). On a shared cluster node this is what keeps a job within
    the cores it was given.
    """
    threads = max(1, int(threads))
    for var in THREAD_VARIABLES:
        os.environ[var] = str(threads)
    import faiss
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)
    threadpool_limits(threads)


def report_failures(rule: str) -> None:
    """End the script, on bad input or a refused write, with one line naming the file and the
    reason (:func:`psp.io.failure_message`), in the log and on the terminal, instead of a
    traceback; any other exception (a bug) keeps its traceback. The exit status stays 1, so
    Snakemake fails the job and removes its outputs.

    An exception hook, so that the scripts stay free of error handling: Snakemake runs each in
    its own interpreter, where an exception nothing catches ends up here.
    """

    def hook(kind, err, traceback) -> None:
        message = failure_message(err)
        if message is None:
            sys.__excepthook__(kind, err, traceback)
            return
        for stream in dict.fromkeys([sys.stderr, sys.__stderr__]):
            print(f"rule {rule}: error: {message}", file=stream, flush=True)

    sys.excepthook = hook


def labelled(files, kind: str) -> dict[str, str]:
    """A rule's ``input``, ``output`` or ``log`` files by label: ``kind.name`` for a named one,
    ``kind[i]`` for the others (and for every file of a named list)."""
    names = {value: f"{kind}.{name}" for name, value in files.items() if isinstance(value, str)}
    found: dict[str, str] = {}
    for index, path in enumerate(files):
        label = names.get(path, f"{kind}[{index}]")
        found[label if found.get(label, path) == path else f"{kind}[{index}]"] = path
    return found


def job_roles(smk) -> FileRoles:
    """What a job reads (its ``input``) and writes (its ``output`` and ``log``)."""
    return FileRoles(
        outputs=labelled(smk.output, "output") | labelled(smk.log, "log"),
        inputs=labelled(smk.input, "input"),
    )


def setup(smk) -> None:
    """Refuse, before anything is read or written, a job an output of which is one of its
    inputs (:class:`psp.io.FileRoles`: the same path, a symbolic or a hard link); route stderr
    and logging to ``smk.log[0]``, limit all threads to ``smk.threads``, let a SIGTERM
    (Snakemake cancelling the job, a cluster scheduler) remove the job's temporaries, and report
    a failure a user can act on in one line (:func:`report_failures`)."""
    report_failures(getattr(smk, "rule", "?"))
    job_roles(smk).check()
    if smk.log:
        stream = open(smk.log[0], "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives for the job
        sys.stderr = stream
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    limit_threads(getattr(smk, "threads", 1))
    exit_on_sigterm()
