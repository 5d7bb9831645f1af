"""What the fault tests share: the real ``psp`` command run as a user runs it, and a look for
anything a failed run must not leave behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PSP = Path(sys.executable).parent / "psp"


def run_psp(*args, stdin: str | bytes | None = None, timeout: float = 300):
    """``psp ARGS`` in a subprocess; stdout and stderr captured as text (bytes with bytes stdin)."""
    return subprocess.run(
        [str(PSP), *map(str, args)],
        input=stdin,
        capture_output=True,
        text=not isinstance(stdin, bytes),
        timeout=timeout,
    )


def temporaries(folder: Path) -> list[str]:
    """Hidden temporaries under ``folder`` (what psp.io writes before a rename)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*") if p.name != ".lock")
