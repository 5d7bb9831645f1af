"""The work dir of a one-machine mining run: who may use it, and what in it may be reused.

``psp mine`` keeps its shards, indexes and kNN parts in a work dir so that a rerun after a crash
resumes instead of starting over. That is only safe if the rerun has the same inputs, so the
work dir's ``manifest.json`` records the sha256 of every model file and input file and the
settings that shape the shards; and only one run may use a work dir at a time, so it is locked.

Two kinds of work dir:

- the run's own (``<output>.work``, ``owned``): removed when the run succeeds or fails on bad
  input (a rerun would fail the same way); kept after any other failure (a crash, a kill, a full
  disk), so the rerun resumes; rebuilt, with a warning, when the rerun's inputs differ;
- one the user named (``--work-dir``): never removed, and a mismatch is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from psp.io import InputError, atomic_open, sha256_file

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
LOCK = ".lock"


def fingerprint(
    model_files: Sequence[str | os.PathLike], inputs: dict[str, str | os.PathLike], settings: dict
) -> dict:
    """What a resumed run must find unchanged: model files and inputs by content, and settings.

    Files are keyed by content, not path or time: a model replaced in place is a different model,
    and a copied input is the same input.
    """
    return {
        **{f"model {Path(path).name}": sha256_file(path) for path in model_files},
        **{f"{name} input": sha256_file(path) for name, path in inputs.items()},
        **settings,
    }


def _lock(work_dir: Path) -> int:
    """An exclusive lock on ``work_dir`` held until the returned descriptor is closed."""
    fd = os.open(work_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(
            f"{work_dir}: in use by another psp mine run (same output or work dir); wait for it "
            "to finish or choose another output"
        ) from None
    return fd


def _clear(work_dir: Path) -> None:
    """Remove everything in ``work_dir`` but the lock this run holds."""
    for entry in work_dir.iterdir():
        if entry.name == LOCK:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _adopt(work_dir: Path, manifest: dict, owned: bool) -> None:
    """Check ``work_dir`` against ``manifest``: reuse on a match, else rebuild or refuse."""
    path = work_dir / MANIFEST
    leftovers = [entry.name for entry in work_dir.iterdir() if entry.name != LOCK]
    if path.exists():
        previous = json.loads(path.read_text())
        changed = sorted(
            key
            for key in manifest.keys() | previous.keys()
            if previous.get(key) != manifest.get(key)
        )
        if not changed:
            log.info("%s: resuming (same model, inputs and settings)", work_dir)
            return
        reason = f"its {MANIFEST} records a different {', '.join(changed)}"
    elif leftovers:
        reason = f"it holds files but no {MANIFEST}"
    else:
        reason = None
    if reason is not None:
        if not owned:
            raise InputError(
                f"{work_dir}: {reason}, so its shards cannot be reused; remove it or name an "
                "empty work dir"
            )
        log.warning("%s: %s; rebuilding it", work_dir, reason)
        _clear(work_dir)
    with atomic_open(path, "wt") as out:
        json.dump(manifest, out, indent=2)


@contextlib.contextmanager
def claimed(work_dir: str | os.PathLike, manifest: dict, owned: bool) -> Iterator[Path]:
    """Lock ``work_dir``, reuse or rebuild it per ``manifest``, and clean up after the run.

    See the module docstring for what ``owned`` changes.
    """
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    fd = _lock(work_dir)
    try:
        _adopt(work_dir, manifest, owned)
        yield work_dir
    except InputError:
        if owned:
            shutil.rmtree(work_dir, ignore_errors=True)
        raise
    else:
        if owned:
            shutil.rmtree(work_dir)
    finally:
        os.close(fd)
