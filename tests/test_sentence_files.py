"""Corpora as shipped (psp.data.sentence_files): text, gzip, Zstandard, JSON Lines, Parquet; the
kind told from the name and checked against the content; records numbered as in the file."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from psp.data.sentence_files import Fields, FileFormat, check_file, format_of, iter_records
from psp.io import InputError


def write_jsonl(path, records: list[dict]) -> None:
    lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    data = lines.encode("utf-8")
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    elif path.name.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("corpus.txt", FileFormat("text", None)),
        ("corpus", FileFormat("text", None)),
        ("corpus.es.gz", FileFormat("text", "gz")),
        ("corpus.txt.zst", FileFormat("text", "zst")),
        ("corpus.jsonl", FileFormat("jsonl", None)),
        ("corpus.ndjson.gz", FileFormat("jsonl", "gz")),
        ("CORPUS.JSONL.ZST", FileFormat("jsonl", "zst")),
        ("corpus.parquet", FileFormat("parquet", None)),
        ("corpus.pq", FileFormat("parquet", None)),
    ],
)
def test_the_name_says_the_format(name, fmt):
    assert format_of(name) == fmt


def test_every_format_gives_the_same_records(news, tmp_path):
    lines = [news[0], "", news[1], "  ", news[2]]
    plain = tmp_path / "s.txt"
    plain.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    packed = {
        "s.txt.gz": gzip.compress(plain.read_bytes()),
        "s.txt.zst": zstandard.ZstdCompressor().compress(plain.read_bytes()),
    }
    for name, data in packed.items():
        (tmp_path / name).write_bytes(data)
    for name in ("s.jsonl", "s.jsonl.gz", "s.jsonl.zst"):
        write_jsonl(
            tmp_path / name, [{"text": line, "url": f"u{i}"} for i, line in enumerate(lines)]
        )
    pq.write_table(pa.table({"text": lines}), tmp_path / "s.parquet", row_group_size=2)
    expected = [(n, line) for n, line in enumerate(lines, start=1)]
    for path in sorted(tmp_path.iterdir()):
        records = [(r.number, r.text) for r in iter_records(path)]
        assert records == expected, path.name


def test_document_ids_from_jsonl_and_parquet(tmp_path):
    records = [
        {"id": 7, "text": "Hola."},
        {"id": "doc-2", "text": None},
        {"id": None, "text": "Sí"},
    ]
    write_jsonl(tmp_path / "d.jsonl", records)
    pq.write_table(pa.table({"txt": ["Hola.", None, "Sí"], "doc": [7, 8, None]}), tmp_path / "d.pq")
    got = [
        (r.number, r.text, r.doc_id)
        for r in iter_records(tmp_path / "d.jsonl", Fields(doc_id="id"))
    ]
    assert got == [(1, "Hola.", "7"), (2, "", "doc-2"), (3, "Sí", None)]
    got = [(r.text, r.doc_id) for r in iter_records(tmp_path / "d.pq", Fields("txt", "doc"))]
    assert got == [("Hola.", "7"), ("", "8"), ("Sí", None)]


def test_a_record_keeps_to_one_line(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [{"text": "dos\nlíneas\r\nen una"}])
    assert [r.text for r in iter_records(tmp_path / "d.jsonl")] == ["dos líneas en una"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("s.txt", gzip.compress(b"hola\n", mtime=0), "plain text, but the content is gzip"),
        ("s.gz", b"hola\n", "plain text, gzip-compressed, but the content is neither"),
        (
            "s.txt.zst",
            gzip.compress(b"hola\n", mtime=0),
            "plain text, Zstandard-compressed, but the content is gzip",
        ),
        ("s.jsonl", b"PAR1....", "JSON Lines, but the content is Parquet"),
        ("s.parquet", b'{"text": "hola"}\n', "Parquet, but the content is neither"),
    ],
)
def test_content_that_does_not_match_the_name_is_refused(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError, match=f"^{path}: the name says {message}"):
        check_file(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", r"s.jsonl:2: not a JSON object"),
        ('["a list"]', r"s.jsonl:2: a JSON list, not an object"),
        ('{"body": "hola"}', r"s.jsonl:2: no field 'text' \(its fields: 'body'\)"),
        ('{"text": 3}', r"s.jsonl:2: field 'text' is 3, not a string"),
    ],
)
def test_bad_jsonl_names_the_line(tmp_path, line, message):
    path = tmp_path / "s.jsonl"
    path.write_text('{"text": "bien"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message):
        list(iter_records(path))


def test_parquet_without_the_columns_is_refused_before_reading(tmp_path):
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"sentence": ["hola"], "n": [1]}), path)
    with pytest.raises(
        InputError, match=r"s.parquet: no column 'text' \(its columns: sentence, n\)"
    ):
        check_file(path)
    with pytest.raises(InputError, match=r"column 'n' holds int64, not strings"):
        check_file(path, Fields(text="n"))
    with pytest.raises(InputError, match=r"no column 'doc'"):
        check_file(path, Fields(text="sentence", doc_id="doc"))


def test_plain_text_has_no_document_ids(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("hola\n")
    with pytest.raises(InputError, match=r"s.txt: plain text has no fields, so no document id"):
        check_file(path, Fields(doc_id="id"))


def test_truncated_zstandard_is_named(tmp_path):
    path = tmp_path / "s.txt.zst"
    data = zstandard.ZstdCompressor().compress(b"".join(b"line %d\n" % i for i in range(5000)))
    path.write_bytes(data[:-30])
    with pytest.raises(InputError, match="s.txt.zst: corrupt or truncated compressed file"):
        list(iter_records(path))
