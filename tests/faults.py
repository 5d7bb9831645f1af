"""What the fault tests share: the real ``psp`` command run as a user runs it, a look for
anything a failed run must not leave behind, and folders that really refuse writes."""

from __future__ import annotations

import functools
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PSP = Path(sys.executable).parent / "psp"

# The ways a folder refuses writes, each real: the kernel says no, as it would to a user.
FULL = "full"  # a tmpfs filled to its last byte: ENOSPC, as a full disk
SIZE_LIMIT = "file size limit"  # RLIMIT_FSIZE (ulimit -f): EFBIG, as a file system's maximum
READ_ONLY = "read-only"  # the folder bind-mounted read-only: EROFS
NO_PERMISSION = "no permission"  # mode 0555 where root is an unmapped user: EACCES
FAULTS = (FULL, SIZE_LIMIT, READ_ONLY, NO_PERMISSION)

#: RLIMIT_FSIZE under :data:`SIZE_LIMIT`: below every output the tests write, above none.
SIZE_LIMIT_BYTES = 16 * 1024
FILLER = "filler"

# Run in the namespace: set the folder up, run the command, list what the folder holds (a tmpfs
# is gone once the namespace ends) into the listing file, and exit with the command's status.
_SETUP = {
    FULL: f'mount -t tmpfs -o size=256k tmpfs "$1" && (dd if=/dev/zero of="$1/{FILLER}" bs=4k'
    " 2>/dev/null; true)",
    READ_ONLY: 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"',
}
_SCRIPT = (
    '{setup} || exit 99; dir=$1 listing=$2; shift 2; "$@"; status=$?; '
    f'find "$dir" -mindepth 1 ! -name {FILLER} -printf "%P\\n" | sort > "$listing"; '
    "exit $status"
)
_UNSHARE = {
    FULL: ["unshare", "--user", "--map-root-user", "--mount"],
    READ_ONLY: ["unshare", "--user", "--map-root-user", "--mount"],
    # No uid map: root is "nobody" in the namespace and loses CAP_DAC_OVERRIDE over the host's
    # files, so their mode bits apply to it (chmod alone does not stop root).
    NO_PERMISSION: ["unshare", "--user"],
    SIZE_LIMIT: [],
}


def pair_filters_off() -> dict:
    """The mining config keys that turn every pair filter off: for tests of the search and the
    shards, whose English-on-both-sides pairs of an untrained model the filters would remove."""
    from psp.mine.config import PairFilterConfig

    return PairFilterConfig.none().to_dict()


def pair_filter_flags_off() -> list[str]:
    """:func:`pair_filters_off` as ``psp mine`` flags."""
    flags = []
    for key, value in pair_filters_off().items():
        flag = "--" + key.replace("_", "-")
        flags += [f"--no-{flag[2:]}"] if value is False else [flag, "none"]
    return flags


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


@functools.cache
def namespaces_work() -> bool:
    """Whether this machine lets a process make its own user and mount namespace (util-linux's
    ``unshare``), where the tests mount and remount without touching the host's mounts."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run([*_UNSHARE[FULL], "true"], capture_output=True)
    return probe.returncode == 0


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (SIZE_LIMIT_BYTES, SIZE_LIMIT_BYTES))


def run_refused(fault: str, folder: Path, command: list, timeout: float = 300):
    """Run ``command`` while ``folder`` refuses writes as ``fault`` says; returns the finished
    process and the paths ``folder`` holds afterwards (relative, sorted; a :data:`FULL`
    folder's filler left out)."""
    if fault != SIZE_LIMIT and not namespaces_work():
        pytest.skip("needs unshare (util-linux) and user namespaces for a real mount")
    folder.mkdir(parents=True, exist_ok=True)
    listing = folder.with_name(folder.name + ".listing")
    script = _SCRIPT.format(setup=_SETUP.get(fault, "true"))
    argv = [*_UNSHARE[fault], "sh", "-c", script, "sh", folder, listing, *command]
    if fault == NO_PERMISSION:
        folder.chmod(0o555)
    try:
        proc = subprocess.run(
            [str(a) for a in argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=_limit_file_size if fault == SIZE_LIMIT else None,
        )
    finally:
        folder.chmod(0o755)
    assert proc.returncode != 99, f"could not set up {fault} {folder}: {proc.stderr}"
    return proc, listing.read_text().split()


def psp_refused(fault: str, folder: Path, *args, timeout: float = 300):
    """:func:`run_refused` for ``psp ARGS``."""
    return run_refused(fault, folder, [PSP, *args], timeout=timeout)
