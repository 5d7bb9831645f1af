"""Monolingual text as corpora are shipped: one sentence a line, or records with a text field.

Three kinds of file, told from the name and checked against the first bytes before anything is
read (a mismatch is an :class:`~psp.io.InputError` saying what the content is):

- text (any other name): one sentence a line, UTF-8;
- JSON Lines (``.jsonl``, ``.ndjson``): one JSON object a line, the sentence under
  ``text_field`` and, where asked, a document id under ``id_field``;
- Parquet (``.parquet``, ``.pq``): a string column ``text_field`` (and any column
  ``id_field``), read one record batch at a time.

Text and JSON Lines may be compressed, ``.gz`` (gzip) or ``.zst`` (Zstandard), after their
own suffix (``corpus.jsonl.zst``). Every kind is streamed: memory holds one buffered block, or
one Parquet batch, whatever the file's size.

Each record carries its number in the file (the 1-based line, or the 1-based row of a Parquet
file), which the miner keeps as the provenance of a mined sentence. A record's line breaks
become spaces: downstream one sentence is one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from psp.io import InputError, iter_raw_lines

Kind = Literal["text", "jsonl", "parquet"]

#: The first bytes of each format the name may be checked against.
MAGIC = {"gz": b"\x1f\x8b", "zst": b"\x28\xb5\x2f\xfd", "parquet": b"PAR1"}
JSONL_SUFFIXES = (".jsonl", ".ndjson")
PARQUET_SUFFIXES = (".parquet", ".pq")
COMPRESSIONS = {".gz": "gz", ".zst": "zst"}
PARQUET_BATCH_ROWS = 8192
#: What the first bytes say a file is, in words.
CONTENT = {
    "gz": "gzip-compressed",
    "zst": "Zstandard-compressed",
    "parquet": "Parquet",
    None: "neither compressed nor Parquet",
}


@dataclass(frozen=True)
class Fields:
    """Where a record file keeps each sentence (``text``) and its document id (``doc_id``,
    ``None``: not read). Plain text has no fields: it cannot give a document id."""

    text: str = "text"
    doc_id: str | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """One sentence as read: its 1-based line (row for Parquet) in the file, its text (``None``
    for a line of a text file that is not valid UTF-8) and its document id, if one was read."""

    number: int
    text: str | None
    doc_id: str | None = None


@dataclass(frozen=True)
class FileFormat:
    """What a file holds, as its name says: ``kind`` and ``compression`` (``None``, ``gz`` or
    ``zst``; Parquet compresses inside the file)."""

    kind: Kind
    compression: str | None

    def describe(self) -> str:
        names = {"text": "plain text", "jsonl": "JSON Lines", "parquet": "Parquet"}
        packed = {"gz": ", gzip-compressed", "zst": ", Zstandard-compressed", None: ""}
        return names[self.kind] + packed[self.compression]


def format_of(path: str | os.PathLike) -> FileFormat:
    """The format ``path``'s name announces (not yet checked against its content)."""
    name = Path(path).name.lower()
    suffix = Path(name).suffix
    compression = COMPRESSIONS.get(suffix)
    if compression is not None:
        name = name.removesuffix(suffix)
    if name.endswith(PARQUET_SUFFIXES) and compression is None:
        return FileFormat("parquet", None)
    return FileFormat("jsonl" if name.endswith(JSONL_SUFFIXES) else "text", compression)


def _content(head: bytes) -> str | None:
    """Which of :data:`MAGIC` ``head`` starts with, if any."""
    return next((name for name, magic in MAGIC.items() if head.startswith(magic)), None)


def check_file(path: str | os.PathLike, fields: Fields = Fields()) -> FileFormat:
    """The format of ``path``, after checking that its first bytes agree with its name and
    that ``fields`` can be read from it; an :class:`InputError` names the file and the fix.

    Only the first bytes are read (and a Parquet file's schema), so the check is instant
    before a long run. A JSON Lines record that lacks a field is found where it is read.
    """
    fmt = format_of(path)
    with open(path, "rb") as handle:
        head = handle.read(4)
    found = _content(head)
    expected = fmt.compression or ("parquet" if fmt.kind == "parquet" else None)
    if head and found != expected:
        raise InputError(
            f"{path}: the name says {fmt.describe()}, but the content is {CONTENT[found]}; "
            "name the file for what it holds (.txt, .jsonl or .parquet, then .gz or .zst)"
        )
    if fmt.kind == "text" and fields.doc_id is not None:
        raise InputError(
            f"{path}: plain text has no fields, so no document id ({fields.doc_id!r}) can be "
            "read from it; give the corpus as JSON Lines or Parquet, or no id field"
        )
    if fmt.kind == "parquet":
        _parquet_columns(path, fields)
    return fmt


def iter_records(path: str | os.PathLike, fields: Fields = Fields()) -> Iterator[Record]:
    """Every record of ``path`` in order, after :func:`check_file`; a record with no text
    (a blank line, a null) has the empty string, for the caller to skip and count.

    Raises:
        InputError: a content that does not match the name, a JSON Lines line that is not a
            JSON object or lacks a field (naming the line), a truncated or corrupt file.
    """
    fmt = check_file(path, fields)
    if fmt.kind == "parquet":
        yield from _parquet_records(path, fields)
    elif fmt.kind == "jsonl":
        yield from _jsonl_records(path, fields)
    else:
        for number, raw in iter_raw_lines(path):
            try:
                yield Record(number, raw.decode("utf-8"))
            except UnicodeDecodeError:
                yield Record(number, None)


def _one_line(text: str) -> str:
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def _field(record: dict, name: str, where: str):
    try:
        return record[name]
    except KeyError:
        keys = ", ".join(map(repr, list(record)[:8])) or "none"
        raise InputError(f"{where}: no field {name!r} (its fields: {keys})") from None


def _jsonl_records(path, fields: Fields) -> Iterator[Record]:
    for number, raw in iter_raw_lines(path):
        where = f"{path}:{number}"
        if not raw.strip():
            yield Record(number, "")
            continue
        try:
            record = json.loads(raw)
        except ValueError as err:  # JSONDecodeError and UnicodeDecodeError
            raise InputError(f"{where}: not a JSON object ({err})") from err
        if not isinstance(record, dict):
            raise InputError(f"{where}: a JSON {type(record).__name__}, not an object")
        text = _field(record, fields.text, where)
        if text is not None and not isinstance(text, str):
            raise InputError(f"{where}: field {fields.text!r} is {text!r}, not a string")
        doc_id = None if fields.doc_id is None else _field(record, fields.doc_id, where)
        yield Record(number, _one_line(text or ""), None if doc_id is None else str(doc_id))


def _parquet_columns(path, fields: Fields) -> list[str]:
    """The columns to read, after checking the file is Parquet and holds them (text a string)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as err:
        raise InputError(f"{path}: not a readable Parquet file: {err}") from err
    columns = [fields.text] + ([fields.doc_id] if fields.doc_id is not None else [])
    for name in columns:
        if name not in schema.names:
            raise InputError(
                f"{path}: no column {name!r} (its columns: {', '.join(schema.names[:12])})"
            )
    text_type = schema.field(fields.text).type
    if not (pa.types.is_string(text_type) or pa.types.is_large_string(text_type)):
        raise InputError(f"{path}: column {fields.text!r} holds {text_type}, not strings")
    return list(dict.fromkeys(columns))


def _parquet_records(path, fields: Fields) -> Iterator[Record]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = _parquet_columns(path, fields)
    number = 0
    try:
        with pq.ParquetFile(path) as parquet:
            for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns):
                texts = batch.column(fields.text).to_pylist()
                ids = (
                    batch.column(fields.doc_id).to_pylist()
                    if fields.doc_id is not None
                    else [None] * len(texts)
                )
                for text, doc_id in zip(texts, ids, strict=True):
                    number += 1
                    yield Record(
                        number, _one_line(text or ""), None if doc_id is None else str(doc_id)
                    )
    except (OSError, pa.ArrowException) as err:
        raise InputError(f"{path}: corrupt Parquet file after row {number}: {err}") from err
