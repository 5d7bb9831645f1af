"""``psp mine`` on corpora as shipped: JSON Lines, Parquet and Zstandard mine the same pairs as
the same sentences in plain text; ``--provenance`` points at each side's input line (and
document id), in TSV and in typed Parquet."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from psp.cli import main

from .test_sentence_files import write_jsonl


@pytest.fixture(scope="module")
def sides(news) -> tuple[list[str], list[str]]:
    """Two sides of real sentences, some shared (pairs to find), with blank lines among them."""
    src = [*news[:30], "", *news[60:70], "   "]
    tgt = [*news[20:40], "", *news[65:90]]
    return src, tgt


def mine(model, src, tgt, out, *flags) -> int:
    argv = ["mine", "--model", model, "--src-file", src, "--tgt-file", tgt, "--output", out]
    return main([str(arg) for arg in [*argv, "--threshold=-1e9", *flags]])


def as_text(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def test_every_input_format_mines_the_same_pairs(tiny_model, sides, tmp_path):
    files = {}
    for side, lines in zip(("src", "tgt"), sides, strict=True):
        plain = as_text(tmp_path / f"{side}.txt", lines)
        zst = tmp_path / f"{side}.txt.zst"
        zst.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
        jsonl = tmp_path / f"{side}.jsonl.gz"
        write_jsonl(jsonl, [{"body": line, "n": i} for i, line in enumerate(lines)])
        parquet = tmp_path / f"{side}.parquet"
        pq.write_table(pa.table({"body": lines}), parquet, row_group_size=7)
        files[side] = {"text": plain, "zst": zst, "jsonl": jsonl, "parquet": parquet}
    mined = {}
    for kind in ("text", "zst", "jsonl", "parquet"):
        out = tmp_path / kind / "mined.tsv.gz"
        field = [] if kind in ("text", "zst") else ["--text-field", "body"]
        assert mine(tiny_model, files["src"][kind], files["tgt"][kind], out, *field) == 0
        mined[kind] = gzip.open(out, "rt", encoding="utf-8").read()
    assert mined["text"].count("\n") > 10
    assert mined["zst"] == mined["jsonl"] == mined["parquet"] == mined["text"]


def test_provenance_points_at_the_input_lines_and_documents(tiny_model, sides, tmp_path):
    src_lines, tgt_lines = sides
    src, tgt = tmp_path / "src.jsonl", tmp_path / "tgt.jsonl"
    write_jsonl(src, [{"text": line, "doc": f"es-{i // 5}"} for i, line in enumerate(src_lines)])
    write_jsonl(tgt, [{"text": line, "doc": 100 + i // 5} for i, line in enumerate(tgt_lines)])
    out = tmp_path / "mined.tsv.gz"
    assert mine(tiny_model, src, tgt, out, "--provenance", "--id-field", "doc") == 0
    stats = json.loads((tmp_path / "mined.stats.json").read_text())
    assert stats["columns"] == ["score", "src", "tgt", "src_line", "tgt_line", "src_id", "tgt_id"]
    src_records = [json.loads(line) for line in src.read_text().splitlines()]
    tgt_records = [json.loads(line) for line in tgt.read_text().splitlines()]
    rows = [line.split("\t") for line in gzip.open(out, "rt").read().splitlines()]
    assert len(rows) == stats["kept"] > 10
    for _, src_text, tgt_text, src_line, tgt_line, src_id, tgt_id in rows:
        assert src_records[int(src_line) - 1] == {"text": src_text, "doc": src_id}
        assert tgt_records[int(tgt_line) - 1]["text"] == tgt_text
        assert str(tgt_records[int(tgt_line) - 1]["doc"]) == tgt_id
    # the blank line 31 is skipped, so rows after it point past it
    assert any(int(row[3]) > 31 for row in rows)

    parquet = tmp_path / "mined.parquet"
    flags = ["--provenance", "--id-field", "doc", "--format", "parquet"]
    assert mine(tiny_model, src, tgt, parquet, *flags) == 0
    table = pq.read_table(parquet)
    assert (
        table.schema.types
        == [pa.float32(), pa.string(), pa.string(), pa.int64(), pa.int64()] + [pa.string()] * 2
    )
    assert table.column_names == stats["columns"]
    assert [
        [
            f"{r['score']:.4f}",
            r["src"],
            r["tgt"],
            str(r["src_line"]),
            str(r["tgt_line"]),
            r["src_id"],
            r["tgt_id"],
        ]
        for r in table.to_pylist()
    ] == rows


def test_a_plain_text_side_has_no_id_column(tiny_model, sides, tmp_path):
    src = tmp_path / "src.parquet"
    pq.write_table(
        pa.table({"text": sides[0], "url": [f"u{i}" for i in range(len(sides[0]))]}), src
    )
    tgt = as_text(tmp_path / "tgt.txt.gz", sides[1])
    tgt.write_bytes(gzip.compress(tgt.read_bytes()))
    out = tmp_path / "mined.tsv"
    assert mine(tiny_model, src, tgt, out, "--provenance", "--id-field", "url") == 0
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert rows and all(len(row) == 6 and row[5].startswith("u") for row in rows)
    assert all(
        sides[0][int(row[3]) - 1] == row[1] and sides[1][int(row[4]) - 1] == row[2] for row in rows
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--format", "parquet"], "the name says TSV but --format is parquet"),
        (["--id-field", "doc"], "--id-field names the document ids of --provenance"),
        (["--text-field", "body"], "src.jsonl:1: no field 'body' (its fields: 'text')"),
    ],
)
def test_bad_input_options_stop_before_any_work(
    tiny_model, sides, tmp_path, capsys, flags, message
):
    src = tmp_path / "src.jsonl"
    write_jsonl(src, [{"text": line} for line in sides[0]])
    tgt = as_text(tmp_path / "tgt.txt", sides[1])
    out = tmp_path / "mined.tsv.gz"
    assert mine(tiny_model, src, tgt, out, *flags) == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.jsonl", "tgt.txt"]


def test_the_workflow_side_reads_jsonl_and_parquet_as_text(sides, tmp_path):
    """``mine_text``'s step (``prepare_mining_side``, through ``text_field``) filters the same
    sentences out of JSON Lines and Parquet as out of the plain text."""
    from psp.mine.plan import prepare_mining_side, read_shard_lines

    lines = sides[0]
    write_jsonl(tmp_path / "s.jsonl.zst", [{"body": line} for line in lines])
    pq.write_table(pa.table({"body": lines}), tmp_path / "s.parquet")
    texts = {}
    for name in ("s.txt", "s.jsonl.zst", "s.parquet"):
        if name == "s.txt":
            as_text(tmp_path / name, lines)
        out = tmp_path / f"{name}.sharded.txt.gz"
        plan = prepare_mining_side(
            [tmp_path / name],
            lang="en",
            filters={"langid": False},
            n_shards=2,
            out_text=out,
            out_plan=tmp_path / f"{name}.plan.json",
            out_stats=tmp_path / f"{name}.stats.json",
            text_field="body",
        )
        texts[name] = [line for shard in range(2) for line in read_shard_lines(out, plan, shard)]
    assert len(texts["s.txt"]) > 30
    assert texts["s.jsonl.zst"] == texts["s.parquet"] == texts["s.txt"]
