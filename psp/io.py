"""Small I/O primitives shared by every stage: atomic writes and line readers with good errors.

Every output of the pipeline goes through :func:`atomic_path` or :func:`atomic_open`, so a crash
never leaves a half-written file where a later rule (or a rerun) would take it for done.

Temporaries live next to their output and carry the host and process id in their name
(``.{name}.{host}-{pid}.{random}``). They are removed when the writer raises, and on SIGTERM
once :func:`exit_on_sigterm` is installed; a process killed outright (SIGKILL, out of memory)
cannot clean up, so the next write of the same output removes the temporaries of dead processes
of this host first (:func:`sweep_stale`). Scratch folders in the system temp directory
(:func:`temp_dir`) are named and swept the same way.

A write the system refuses (no space, a file size limit or quota, a read-only or missing folder,
no permission) leaves the writer as :class:`WriteError`, whose message names the output and the
reason, whatever library did the writing; :func:`failure_message` is the one line the ``psp``
command and the workflow scripts print for it (and for bad input) instead of a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gzip
import hashlib
import io
import os
import re
import resource
import shutil
import signal
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class InputError(ValueError):
    """Bad input data; the message names the file (and the line where there is one)."""


class WriteError(OSError):
    """The system refused to write an output; the message names it and the reason, and nothing
    of the write is left behind. Built by the atomic writers below, which know the output's
    name: the failing call itself often does not (a full disk is a bare ``[Errno 28]``)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


# What a file system answers when it refuses a write, and never a read.
_REFUSALS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


# ``.{name}.{host}-{pid}.{random}[.tmp]``: tempfile's random part is 8 of [a-z0-9_].
_TEMPORARY = re.compile(r"\..+\.(?P<host>[^/]+)-(?P<pid>\d+)\.[a-z0-9_]{8}(\.tmp)?")


def _host() -> str:
    """This host's name, as ``socket.gethostname()`` gives it on POSIX (without importing
    socket, 5-10 ms of every command's start-up)."""
    return os.uname().nodename


def _owner_prefix(path: Path) -> str:
    return f".{path.name}.{_host()}-{os.getpid()}."


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def sweep_stale(path: str | os.PathLike, *, own_only: bool = False) -> list[Path]:
    """Remove the temporaries next to ``path`` (files or folders, of any output in its folder)
    that dead processes of this host left; returns what was removed.

    Temporaries of live processes, and of other hosts sharing the file system, are left alone.
    The whole folder is swept, not only ``path``'s own, because some outputs are never written
    again under the same name (a training checkpoint is named by its step); ``own_only`` sweeps
    ``path``'s own alone, for a folder shared with other programs (the system temp directory).
    A temporary that cannot be removed (a read-only folder) is left for a later sweep.
    """
    host, removed = _host(), []
    path = Path(path)
    with contextlib.suppress(FileNotFoundError):
        for entry in path.parent.iterdir():
            match = _TEMPORARY.fullmatch(entry.name)
            if not match or match["host"] != host or _pid_alive(int(match["pid"])):
                continue
            if own_only and not entry.name.startswith(f".{path.name}."):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    entry.unlink(missing_ok=True)
            if not os.path.lexists(entry):
                removed.append(entry)
    return removed


def _reason(refused: OSError) -> str:
    """The system's words for a refused write, with the limit behind a "File too large"."""
    if refused.errno is None:
        return str(refused)
    reason = os.strerror(refused.errno)
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if refused.errno == errno.EFBIG and limit != resource.RLIM_INFINITY:
        reason += f" (this process may write files of at most {limit} bytes: ulimit -f)"
    return reason


def write_error(path: Path, refused: OSError, action: str = "cannot write") -> WriteError:
    """The :class:`WriteError` for ``path``, which the system refused as ``refused`` says (for
    a file written in place rather than through the atomic writers: a download's ``.part``)."""
    return WriteError(refused.errno, f"{path}: {action}: {_reason(refused)}")


def _refusal(err: Exception, probe: Callable[[], None], own: Path) -> OSError | None:
    """The file system's refusal behind ``err``, raised while writing under ``own`` (a temporary
    file or folder), or ``None`` where ``err`` is something else (bad input, a bug).

    Libraries report a refused write without its errno: safetensors and Faiss in their own
    words, which quote the system's (``I/O error: File too large (os error 27)``), numpy's
    ``tofile`` in none (``1000000 requested and 262144 written``). For those ``probe`` writes one
    more byte where the writer stopped: a full disk, a size limit or a quota refuses it too.
    """
    if isinstance(err, OSError):
        if err.filename is not None and not _within(err.filename, own):
            return None  # about another file: an input that cannot be read
        if err.errno in _REFUSALS:
            return err
    elif isinstance(err, InputError) or (
        type(err).__module__ == "builtins" and not isinstance(err, RuntimeError)
    ):
        return None  # bad input, or a bug: not the file system's
    quoted = [code for code in _REFUSALS if os.strerror(code) in str(err)]
    if quoted:
        return OSError(quoted[0], os.strerror(quoted[0]))
    try:
        probe()
    except OSError as refused:
        return refused
    return None


def _within(name, own: Path) -> bool:
    """Whether the file an ``OSError`` names (a path, or a descriptor) is ``own`` or under it."""
    if not isinstance(name, (str, bytes, os.PathLike)):
        return True  # a descriptor: the writer's own file
    return Path(os.path.abspath(os.fsdecode(name))).is_relative_to(os.path.abspath(own))


def _append_byte(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, b"\0")
    finally:
        os.close(fd)


@contextlib.contextmanager
def _refusals_reported(path: Path, own: Path, probe: Callable[[], None]) -> Iterator[None]:
    """Raise a refused write in the block as :class:`WriteError` naming ``path``."""
    try:
        yield
    except WriteError:
        raise  # a nested writer's, which named its own output
    except Exception as err:
        refused = _refusal(err, probe, own)
        if refused is None:
            raise
        raise write_error(path, refused) from err


def _make_folder(path: Path) -> None:
    """Create ``path``'s folder (and its parents) where missing; a refusal names the folder."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_error(path, err, f"cannot create folder {err.filename}") from err


def _make_temporary(path: Path, make: Callable[..., T]) -> T:
    """``make(prefix=, dir=)`` (mkstemp, mkdtemp) for ``path``, a refusal named as its write."""
    try:
        return make(prefix=_owner_prefix(path), dir=path.parent)
    except OSError as err:
        raise write_error(path, err) from err


def failure_message(err: BaseException) -> str | None:
    """The one line that tells a user what failed, or ``None`` for a failure that needs its
    traceback (a bug).

    Bad input and a refused write carry their own message naming the file; any other
    ``OSError`` naming a file (a folder that cannot be created, an input that cannot be read) is
    its name and the system's reason, and one naming none but refusing a write (a full disk
    under a redirected standard output) is the reason.
    """
    if isinstance(err, (InputError, WriteError)):
        return str(err)
    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.filename}: {err.strerror or err}"
    if isinstance(err, OSError) and err.errno in _REFUSALS:
        return f"cannot write: {_reason(err)}"
    return None


def output_mode() -> int:
    """The mode a new file gets under this process's umask (0644 under the usual 022)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            umask = next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration):
        # os.umask can only be read by setting it; a thread creating a file meanwhile would get
        # the wrong mode, so this is the fallback where /proc does not say.
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def _temporary_folder(path: Path, *, own_only: bool, named: Path | None) -> Iterator[Path]:
    """A temporary folder next to ``path``, removed afterwards; a refused write in the block
    names ``named`` (``None``: the folder itself)."""
    _make_folder(path)
    sweep_stale(path, own_only=own_only)
    tmp = Path(_make_temporary(path, tempfile.mkdtemp))
    try:
        with _refusals_reported(named or tmp, tmp, lambda: _append_byte(tmp / ".write-probe")):
            yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def scratch_dir(path: str | os.PathLike) -> contextlib.AbstractContextManager[Path]:
    """A temporary folder next to ``path`` for a writer's intermediate files, removed afterwards
    (stale ones of dead processes are swept first, as for :func:`atomic_path`); a refused write
    in it is a :class:`WriteError` naming ``path``."""
    return _temporary_folder(Path(path), own_only=False, named=Path(path))


def temp_dir(
    name: str, folder: str | os.PathLike | None = None
) -> contextlib.AbstractContextManager[Path]:
    """A scratch folder for work that leaves no output (``psp-mine``, ``psp-speed``), in
    ``folder`` or else the system temp directory (``$TMPDIR``), removed afterwards.

    Named ``.{name}.{host}-{pid}.{random}`` like the temporaries next to outputs, and swept the
    same way once its process is dead, so that runs killed outright (SIGKILL, out of memory) do
    not fill the temp directory; only folders of this ``name`` are swept, as the temp directory
    is every program's.
    """
    return _temporary_folder(
        Path(folder or tempfile.gettempdir()) / name, own_only=True, named=None
    )


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds.

    Use it for writers that want a file name (h5py, numpy, safetensors, matplotlib). The output
    gets the mode the umask gives a new file, whatever the writer created (mkstemp and
    safetensors create 0600, which would keep other users of a shared file system out).
    """
    path = Path(path)
    _make_folder(path)
    sweep_stale(path)
    fd, name = _make_temporary(path, functools.partial(tempfile.mkstemp, suffix=".tmp"))
    os.close(fd)
    tmp = Path(name)
    try:
        with _refusals_reported(path, tmp, lambda: _append_byte(tmp)):
            yield tmp
            os.chmod(tmp, output_mode())
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def exit_on_sigterm() -> None:
    """Make SIGTERM raise :class:`SystemExit` in the main thread, as SIGINT raises
    :class:`KeyboardInterrupt`, so ``finally`` blocks and :func:`atomic_path` remove temporaries
    when a scheduler or a user terminates the process. Call it from the main thread.

    Processes forked afterwards get the default action back at once: a multiprocessing pool
    stops its workers with SIGTERM, and a worker blocked in C code (a lock a thread of the
    parent held at the fork) never returns to Python to run a handler, so only the default
    action ends it.
    """

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    _reset_sigterm_in_children()


@functools.cache
def _reset_sigterm_in_children() -> None:
    """Register, once per process, the fork hook that restores SIGTERM's default action."""
    os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wt", encoding: str = "utf-8"):
    """Open ``path`` for writing through a temporary file; ``.gz`` paths are gzip-compressed.

    The file appears under its final name only once the ``with`` block exits without error.
    """
    path = Path(path)
    binary = "b" in mode
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        raw = handle
        if path.suffix == ".gz":
            # No file name or time in the gzip header: the same content gives the same bytes.
            raw = gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=handle, mtime=0)
        with raw:
            if binary:
                yield raw
            else:
                with io.TextIOWrapper(raw, encoding=encoding, newline="\n") as text:
                    yield text


#: A path that names standard input or output, never a file.
STDIO = "-"


def _identity(path: str | os.PathLike) -> tuple[int, int] | None:
    """``(device, inode)`` of the file ``path`` resolves to, ``None`` where nothing is there."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return info.st_dev, info.st_ino


@dataclass(frozen=True)
class FileRoles:
    """What one command or job writes and reads, each file under a label (the option or rule
    field that names it), so that :meth:`check` can refuse to start when an output is an input.

    An atomic write replaces its output at the end, after the input was read: ``psp score
    --input pairs.tsv --output pairs.tsv`` would run to completion and leave the scores where
    the pairs were. So the check runs before anything is read or written. ``None`` and ``-``
    (standard input or output) name no file and are skipped.

    Attributes:
        outputs: files that are written (replaced).
        inputs: files that are read.
        cleared: folders that are removed or emptied when the work is done (``psp mine``'s own
            work dir): no input may lie inside one.
    """

    outputs: Mapping[str, str | os.PathLike | None]
    inputs: Mapping[str, str | os.PathLike | None]
    cleared: Mapping[str, str | os.PathLike | None] = field(default_factory=dict)

    def _named(self, kind: Mapping) -> dict[str, Path]:
        return {
            label: Path(path)
            for label, path in kind.items()
            if path is not None and os.fspath(path) != STDIO
        }

    def check(self) -> None:
        """Raise :class:`InputError` naming both files where an output resolves to an input:
        the same path, a symbolic link to it or a hard link of it; or where an input lies in a
        folder that is cleared."""
        inputs = {
            label: (path, _identity(path)) for label, path in self._named(self.inputs).items()
        }
        for out_label, out in self._named(self.outputs).items():
            identity = _identity(out)
            for in_label, (path, same) in inputs.items():
                if identity is not None and identity == same:
                    how = (
                        "" if os.path.abspath(out) == os.path.abspath(path) else ", through a link"
                    )
                    raise InputError(
                        f"{out} ({out_label}) is the input {path} ({in_label}){how}: writing it "
                        "would destroy that input; choose another output"
                    )
        for folder_label, folder in self._named(self.cleared).items():
            root = Path(os.path.realpath(folder))
            for in_label, (path, _) in inputs.items():
                if Path(os.path.realpath(path)).is_relative_to(root):
                    raise InputError(
                        f"{path} ({in_label}) lies in {folder} ({folder_label}), which is removed "
                        "when the run ends; move the input or choose another output"
                    )


def sha256_file(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def open_binary(path: str | os.PathLike):
    """Open a plain, gzip (``.gz``) or Zstandard (``.zst``) file for binary reading, by suffix;
    the result is buffered (``read1``, line iteration)."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    if path.suffix == ".zst":
        return io.BufferedReader(_ZstdStream(path), buffer_size=1 << 20)
    return open(path, "rb")


class _ZstdStream(io.RawIOBase):
    """A Zstandard file read as a stream of its frames, one after the other (as gzip reads its
    members). A file cut inside a frame raises ``EOFError`` where it ends, as gzip does: the
    library's own stream reader ends such a file quietly, with its data lost."""

    CHUNK = 1 << 20

    def __init__(self, path: Path):
        import zstandard

        self._decompressor = zstandard.ZstdDecompressor()
        self._file = open(path, "rb")  # noqa: SIM115 - closed with the stream
        self._frame = self._decompressor.decompressobj()
        self._fed = False  # whether the current frame has had any bytes
        self._pending = b""

    def readable(self) -> bool:
        return True

    def _more(self) -> bytes:
        """The next decompressed bytes; ``b""`` at the end of the last whole frame."""
        while True:
            data = self._frame.unused_data if self._frame.eof else b""
            if self._frame.eof:
                self._frame, self._fed = self._decompressor.decompressobj(), False
            data = data or self._file.read(self.CHUNK)
            if not data:
                if self._fed:
                    raise EOFError("Zstandard file ends inside a frame")
                return b""
            self._fed = True
            out = self._frame.decompress(data)
            if out:
                return out

    def readinto(self, buffer) -> int:
        if not self._pending:
            self._pending = self._more()
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def close(self) -> None:
        self._file.close()
        super().close()


def compression_errors() -> tuple[type[BaseException], ...]:
    """What a corrupt or truncated compressed stream raises while it is read."""
    import zstandard

    return (EOFError, zlib.error, gzip.BadGzipFile, zstandard.ZstdError)


def iter_raw_lines(path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_bytes_without_newline)``, 1-based.

    A truncated or corrupt gzip or Zstandard stream raises :class:`InputError` naming the file
    and the last good line, instead of the library's bare ``EOFError``.
    """
    lineno = 0
    try:
        with open_binary(path) as handle:
            for lineno, raw in enumerate(handle, start=1):
                yield lineno, raw.rstrip(b"\r\n")
    except (*compression_errors(), OSError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise InputError(
            f"{path}: corrupt or truncated compressed file after line {lineno}: {err}"
        ) from err


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` of a UTF-8 file; invalid UTF-8 is an error naming file and line."""
    for lineno, raw in iter_raw_lines(path):
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{path}:{lineno}: invalid UTF-8 ({err.reason})") from err


def iter_batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of ``size`` consecutive items (the last may be shorter)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def read_lines(path: str | os.PathLike) -> list[str]:
    """All lines of a UTF-8 text file (plain or ``.gz``), newlines stripped."""
    return [text for _, text in iter_lines(path)]
