"""Shard plans: a side's text cut once into gzip members that each job reads on its own."""

from __future__ import annotations

import gzip
import json

import pytest

from psp.io import InputError
from psp.mine.plan import (
    load_plan,
    read_shard_lines,
    shard_bounds,
    shard_text_file,
    write_sharded_text,
)

LINES = [f"línea número {i} ✓" for i in range(23)]


def test_shard_bounds():
    assert shard_bounds(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert shard_bounds(2, 4) == [(0, 0), (0, 1), (1, 1), (1, 2)]
    with pytest.raises(ValueError):
        shard_bounds(3, 0)


def test_each_shard_reads_only_its_member_and_the_text_stays_one_gzip_file(tmp_path):
    text, plan_path = tmp_path / "side.txt.gz", tmp_path / "side.plan.json"
    plan = write_sharded_text(
        iter(LINES), len(LINES), n_shards=4, out_text=text, out_plan=plan_path
    )
    assert plan == load_plan(plan_path)
    assert [(s.start, s.stop) for s in plan.shards] == shard_bounds(23, 4)
    assert plan.offsets() == [0, 5, 11, 17]
    assert gzip.open(text, "rt", encoding="utf-8").read().splitlines() == LINES
    for number, shard in enumerate(plan.shards):
        assert (
            list(read_shard_lines(text, plan, number, chunk_size=7))
            == LINES[shard.start : shard.stop]
        )
    # the members are contiguous byte ranges: reading shard 2 never touches bytes outside it
    raw = text.read_bytes()
    assert plan.shards[-1].byte_stop == len(raw)
    member = raw[plan.shards[2].byte_start : plan.shards[2].byte_stop]
    assert gzip.decompress(member).decode().splitlines() == LINES[11:17]


def test_same_lines_give_the_same_bytes(tmp_path):
    a = write_sharded_text(
        iter(LINES), 23, n_shards=3, out_text=tmp_path / "a.txt.gz", out_plan=tmp_path / "a.json"
    )
    b = write_sharded_text(
        iter(LINES), 23, n_shards=3, out_text=tmp_path / "b.txt.gz", out_plan=tmp_path / "b.json"
    )
    assert a.fingerprint == b.fingerprint
    assert (tmp_path / "a.txt.gz").read_bytes() == (tmp_path / "b.txt.gz").read_bytes()


def test_a_changed_text_is_caught_by_the_shard_that_reads_it(tmp_path):
    text = tmp_path / "side.txt.gz"
    plan = write_sharded_text(
        iter(LINES), 23, n_shards=2, out_text=text, out_plan=tmp_path / "plan.json"
    )
    other = write_sharded_text(
        iter([*LINES[:-1], "changed"]),
        23,
        n_shards=2,
        out_text=tmp_path / "o.txt.gz",
        out_plan=tmp_path / "o.json",
    )
    text.write_bytes((tmp_path / "o.txt.gz").read_bytes())
    assert list(read_shard_lines(text, plan, 0)) == LINES[:11]  # untouched member still reads
    with pytest.raises(InputError, match=r"side\.txt\.gz: bytes of shard 1 do not match"):
        list(read_shard_lines(text, plan, 1))
    assert other.fingerprint != plan.fingerprint


def test_more_shards_than_lines(tmp_path):
    plan = write_sharded_text(
        iter(["a", "b"]),
        2,
        n_shards=4,
        out_text=tmp_path / "t.txt.gz",
        out_plan=tmp_path / "p.json",
    )
    assert [s.rows for s in plan.shards] == [0, 1, 0, 1]
    assert [list(read_shard_lines(tmp_path / "t.txt.gz", plan, s)) for s in range(4)] == [
        [],
        ["a"],
        [],
        ["b"],
    ]
    capped = shard_text_file(tmp_path / "t.txt.gz", 4, tmp_path / "c.txt.gz", tmp_path / "c.json")
    assert [s.rows for s in capped.shards] == [1, 1]


def test_shard_text_file_from_plain_text(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES))  # no final newline
    plan = shard_text_file(source, 5, tmp_path / "s.txt.gz", tmp_path / "s.json")
    assert plan.n_lines == 23 and len(plan) == 5
    got = [line for s in range(5) for line in read_shard_lines(tmp_path / "s.txt.gz", plan, s)]
    assert got == LINES


def test_line_count_must_match(tmp_path):
    with pytest.raises(ValueError, match="more than n_lines=3"):
        write_sharded_text(
            iter(LINES), 3, n_shards=1, out_text=tmp_path / "t.txt.gz", out_plan=tmp_path / "p.json"
        )
    assert not (tmp_path / "p.json").exists()


def test_bad_plans_are_input_errors_naming_the_file(tmp_path):
    write_sharded_text(
        iter(LINES), 23, n_shards=2, out_text=tmp_path / "t.txt.gz", out_plan=tmp_path / "p.json"
    )
    record = json.loads((tmp_path / "p.json").read_text())
    record["shards"][1]["start"] = 12
    (tmp_path / "bad.json").write_text(json.dumps(record))
    with pytest.raises(InputError, match=r"bad\.json: shard 1 does not follow"):
        load_plan(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("{}")
    with pytest.raises(InputError, match=r"junk\.json: not a shard plan"):
        load_plan(tmp_path / "junk.json")


def test_a_shard_is_written_as_a_stream(tmp_path):
    """Memory holds one block of text, not the shard: 30 MB of lines into one shard allocate
    a few blocks' worth, and the shard reads back whole."""
    import tracemalloc

    from psp.mine.plan import MEMBER_BLOCK_BYTES

    n = 300_000
    lines = (f"line {i} of a long shard, with some words to compress {i * 7919}" for i in range(n))
    tracemalloc.start()
    plan = write_sharded_text(
        lines, n, n_shards=1, out_text=tmp_path / "t.txt.gz", out_plan=tmp_path / "t.json"
    )
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (tmp_path / "t.txt.gz").stat().st_size > 0 and plan.n_lines == n
    assert peak < 8 * MEMBER_BLOCK_BYTES < 30_000_000 / 3
    back = list(read_shard_lines(tmp_path / "t.txt.gz", plan, 0))
    assert (
        len(back) == n
        and back[-1]
        == f"line {n - 1} of a long shard, with some words to compress {(n - 1) * 7919}"
    )
