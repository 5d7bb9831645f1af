"""A side's mining text, cut into shards once: the shard plan.

The step that prepares a side's text (:func:`prepare_mining_side` in the workflow, the side's
files through the sentence filters; :func:`shard_text_file` for ``psp mine``, the file as it is)
writes it as one gzip member per shard and records, in a small JSON file beside it, the line
count, each shard's line range and byte range, and checksums. Every later job reads the plan
instead of the text: an embedding job seeks to its shard's member and decompresses only that;
kNN and reduce jobs take row counts and offsets from the plan. So no job's work grows with the
size of the other shards, which is what lets a 100 × 100 shard grid run as 10,000 small jobs
instead of 10,000 passes over the corpus.

A concatenation of gzip members is itself a valid gzip file, so the text stays readable with
``zcat`` and ``gzip.open`` (the reduce step reads it that way to print the mined sentences).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from psp.data.prepare import prepare_sentences
from psp.data.sentence_files import Fields, Record, iter_records
from psp.io import InputError, atomic_open, atomic_path, iter_lines, scratch_dir

PLAN_VERSION = 1


@dataclass(frozen=True)
class Shard:
    """Lines ``[start, stop)`` of the text, stored as the gzip member at bytes ``[byte_start, byte_stop)``."""

    start: int
    stop: int
    byte_start: int
    byte_stop: int
    sha256: str  # of the member's bytes: an embedding job checks its slice without reading more

    @property
    def rows(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class ShardPlan:
    """How a side's text is cut into shards; ``fingerprint`` is the sha256 of the whole text file.

    ``blank_lines`` counts the lines of the input left out of the text because they held nothing
    but whitespace (see :func:`shard_text_file`).
    """

    n_lines: int
    fingerprint: str
    shards: tuple[Shard, ...]
    blank_lines: int = 0

    def __len__(self) -> int:
        return len(self.shards)

    def offsets(self) -> list[int]:
        """Global row number of each shard's first row."""
        return [shard.start for shard in self.shards]


def shard_bounds(n_lines: int, n_shards: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, stop)`` line ranges whose sizes differ by at most one.

    More shards than lines gives empty shards rather than an error, so a workflow with a fixed
    shard count still runs on a tiny corpus (an empty shard yields an empty embedding array).
    """
    if n_lines < 0 or n_shards < 1:
        raise ValueError(
            f"shard_bounds: need n_lines >= 0 and n_shards >= 1, got {n_lines}, {n_shards}"
        )
    edges = [n_lines * s // n_shards for s in range(n_shards + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


#: Text compressed at a time while a shard's gzip member is written: memory holds one block,
#: whatever the shard's size.
MEMBER_BLOCK_BYTES = 1 << 20


def _write_member(out, lines: Iterator[str], count: int, digests) -> int:
    """Write the next ``count`` of ``lines`` to ``out`` as one gzip member (none for no lines),
    compressed block by block, updating ``digests`` with its bytes; returns its size. No name or
    time in the header, so the output is reproducible."""
    if count == 0:
        return 0
    compressor, size = zlib.compressobj(6, zlib.DEFLATED, 31), 0

    def emit(data: bytes) -> None:
        nonlocal size
        out.write(data)
        size += len(data)
        for digest in digests:
            digest.update(data)

    block: list[str] = []
    held = 0
    for _ in range(count):
        line = next(lines, None)
        if line is None:
            raise ValueError("write_sharded_text: fewer lines than n_lines")
        block.append(f"{line}\n")
        held += len(line) + 1
        if held >= MEMBER_BLOCK_BYTES:
            emit(compressor.compress("".join(block).encode("utf-8")))
            block, held = [], 0
    emit(compressor.compress("".join(block).encode("utf-8")))
    emit(compressor.flush())
    return size


def write_sharded_text(
    lines: Iterable[str],
    n_lines: int,
    *,
    n_shards: int,
    out_text: str | os.PathLike,
    out_plan: str | os.PathLike | None,
    blank_lines: int = 0,
) -> ShardPlan:
    """Write ``lines`` (exactly ``n_lines`` of them) as ``n_shards`` gzip members, and the plan.

    Both files are written atomically; the plan last, so a plan on disk always describes a
    complete text (``out_plan`` None: the caller saves it once its own files are complete).
    Lines must not contain newlines. ``blank_lines`` is recorded in the plan. The lines are
    streamed: memory holds :data:`MEMBER_BLOCK_BYTES` of text, not a shard.
    """
    bounds = shard_bounds(n_lines, n_shards)
    shards, digest, position = [], hashlib.sha256(), 0
    iterator = iter(lines)
    with atomic_path(out_text) as tmp, open(tmp, "wb") as out:
        for start, stop in bounds:
            member_digest = hashlib.sha256()
            size = _write_member(out, iterator, stop - start, (digest, member_digest))
            shards.append(Shard(start, stop, position, position + size, member_digest.hexdigest()))
            position += size
    if next(iterator, None) is not None:
        raise ValueError(f"write_sharded_text: more than n_lines={n_lines} lines given")
    plan = ShardPlan(n_lines, digest.hexdigest(), tuple(shards), blank_lines)
    if out_plan is not None:
        save_plan(plan, out_plan)
    return plan


def _sentences(path: str | os.PathLike, fields: Fields) -> Iterator[Record]:
    """The records of ``path``; a line that is not UTF-8 is an error naming it."""
    for record in iter_records(path, fields):
        if record.text is None:
            raise InputError(f"{path}:{record.number}: invalid UTF-8")
        yield record


def shard_text_file(
    text: str | os.PathLike,
    n_shards: int,
    out_text: str | os.PathLike,
    out_plan: str | os.PathLike,
    *,
    fields: Fields = Fields(),
    out_origins: str | os.PathLike | None = None,
) -> ShardPlan:
    """Re-write a corpus file (text, JSON Lines or Parquet, see :mod:`psp.data.sentence_files`) as a
    sharded text and its plan.

    Lines holding nothing but whitespace are left out and counted in the plan: embedded, they
    would all be the same vector and pair with each other or with anything. So row ``i`` of the
    embeddings is line ``i`` of the sharded text, not of ``text``; outputs read the sharded text.
    ``out_origins`` (written before the plan) gets, for row ``i``, its input's line (row, for
    Parquet) number and document id, space-separated (``fields.doc_id``; empty without).

    Two passes over ``text``: one to count lines, one to write. Shards never outnumber lines
    except for an empty file (one empty shard), so no job gets an empty slice it need not have.
    """
    n_read = n_lines = 0
    for record in _sentences(text, fields):
        n_read += 1
        n_lines += bool(record.text.strip())
    n_shards = max(1, min(n_shards, n_lines))
    with contextlib.ExitStack() as stack:
        origins = stack.enter_context(atomic_open(out_origins, "wt")) if out_origins else None

        def kept() -> Iterator[str]:
            for record in _sentences(text, fields):
                if record.text.strip():
                    if origins is not None:
                        doc_id = " ".join((record.doc_id or "").split())
                        origins.write(f"{record.number} {doc_id}\n")
                    yield record.text

        plan = write_sharded_text(
            kept(),
            n_lines,
            n_shards=n_shards,
            out_text=out_text,
            out_plan=None,
            blank_lines=n_read - n_lines,
        )
    save_plan(plan, out_plan)
    return plan


def prepare_mining_side(
    files: Sequence[str | os.PathLike],
    *,
    lang: str,
    filters: dict[str, Any],
    n_shards: int,
    out_text: str | os.PathLike,
    out_plan: str | os.PathLike,
    out_stats: str | os.PathLike,
    workers: int = 1,
    text_field: str = Fields.text,
) -> ShardPlan:
    """One side of a mining run: ``files`` (text, one sentence a line, or JSON Lines and Parquet
    with the sentence under ``text_field``; read in order) → filtered sentences as a sharded
    text plus its shard plan.

    Exactly ``n_shards`` shards, as the workflow's DAG expects (with fewer lines than shards some
    are empty, and their jobs are trivial).
    """
    out_text = Path(out_text)
    out_text.parent.mkdir(parents=True, exist_ok=True)
    with scratch_dir(out_text) as tmp:
        filtered = tmp / "filtered.txt.gz"
        stats = prepare_sentences(
            None,
            refs=files,
            lang=lang,
            filters=filters,
            out_text=filtered,
            out_stats=out_stats,
            workers=workers,
            fields=Fields(text=text_field),
        )
        lines = (line for _, line in iter_lines(filtered))
        return write_sharded_text(
            lines, stats["kept"], n_shards=n_shards, out_text=out_text, out_plan=out_plan
        )


def save_plan(plan: ShardPlan, path: str | os.PathLike) -> None:
    record = {
        "version": PLAN_VERSION,
        "n_lines": plan.n_lines,
        "fingerprint": plan.fingerprint,
        "blank_lines": plan.blank_lines,
        "shards": [asdict(shard) for shard in plan.shards],
    }
    with atomic_open(path, "wt") as out:
        json.dump(record, out, indent=1)
        out.write("\n")


def load_plan(path: str | os.PathLike) -> ShardPlan:
    """Read and check a plan: shards must tile ``[0, n_lines)`` and the byte ranges the text."""
    try:
        record = json.loads(Path(path).read_text())
        if record.get("version") != PLAN_VERSION:
            raise ValueError(f"plan version {record.get('version')!r}, expected {PLAN_VERSION}")
        shards = tuple(Shard(**shard) for shard in record["shards"])
        plan = ShardPlan(
            int(record["n_lines"]),
            str(record["fingerprint"]),
            shards,
            int(record.get("blank_lines", 0)),
        )
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InputError(f"{path}: not a shard plan: {err}") from err
    line, byte = 0, 0
    for number, shard in enumerate(plan.shards):
        if (shard.start, shard.byte_start) != (line, byte) or shard.stop < shard.start:
            raise InputError(f"{path}: shard {number} does not follow the previous one")
        line, byte = shard.stop, shard.byte_stop
    if line != plan.n_lines or not plan.shards:
        raise InputError(f"{path}: shards cover {line} lines, the plan says {plan.n_lines}")
    return plan


def read_shard_lines(
    text: str | os.PathLike, plan: ShardPlan, shard: int, chunk_size: int = 1 << 20
) -> Iterator[str]:
    """The lines of one shard: a seek to its gzip member and a streamed decompression of it alone.

    The member's checksum is verified as it is read, so a text changed since the plan was written
    is an error naming the file (raised at the end of the shard, before its consumer can finish
    an output), never a silent misalignment of embeddings and lines.
    """
    if not 0 <= shard < len(plan):
        raise ValueError(f"shard {shard} outside [0, {len(plan)})")
    entry = plan.shards[shard]
    digest, inflate = hashlib.sha256(), zlib.decompressobj(wbits=31)
    remaining, tail, count = entry.byte_stop - entry.byte_start, b"", 0
    try:
        with open(text, "rb") as handle:
            handle.seek(entry.byte_start)
            while remaining > 0:
                block = handle.read(min(chunk_size, remaining))
                if not block:
                    break
                remaining -= len(block)
                digest.update(block)
                *complete, tail = (tail + inflate.decompress(block)).split(b"\n")
                count += len(complete)
                for raw in complete:
                    yield raw.decode("utf-8")
    except (zlib.error, UnicodeDecodeError) as err:
        raise InputError(f"{text}: shard {shard} is not gzip-compressed UTF-8 text: {err}") from err
    if remaining or digest.hexdigest() != entry.sha256:
        raise InputError(
            f"{text}: bytes of shard {shard} do not match its plan; the text changed after the "
            "plan was written (prepare it again)"
        )
    if tail or count != entry.rows:
        raise InputError(f"{text}: shard {shard} holds {count} lines, its plan says {entry.rows}")
