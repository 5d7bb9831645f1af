"""Corpus readers on the real mirror (counts) and on tiny fixtures (every error path)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from psp.data.corpora import RawPair, corpus_files, iter_pairs, iter_sentences, sentence_file
from psp.io import InputError


def _write(path: Path, *lines: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join((x.encode() if isinstance(x, str) else x) + b"\n" for x in lines)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


# ---------------------------------------------------------------------------------------------
# Real mirror


def test_bitext_on_the_mirror(shared_data):
    pairs = list(iter_pairs(shared_data, "bitext/es-en/wmt-newstest", ("es", "en")))
    assert len(pairs) == 16_350
    assert all(p.src is not None and p.tgt is not None and p.score is None for p in pairs)
    assert pairs[0].where == f"{shared_data}/bitext/es-en/wmt-newstest.es.gz:1"
    swapped = next(iter_pairs(shared_data, "bitext/es-en/wmt-newstest", ("en", "es")))
    assert (swapped.src, swapped.tgt) == (pairs[0].tgt, pairs[0].src)
    # Languages default to the folder name.
    assert next(iter_pairs(shared_data, "bitext/es-en/wmt-newstest")) == pairs[0]
    # An English paraphrase model reads it as translation pairs, not English against itself.
    assert next(iter_pairs(shared_data, "bitext/es-en/wmt-newstest", ("en", "en"))) == pairs[0]


def test_tatoeba_and_paraphrase_corpora_on_the_mirror(shared_data):
    assert sum(1 for _ in iter_pairs(shared_data, "tatoeba/tatoeba.spa-eng")) == 1000
    assert sum(1 for _ in iter_pairs(shared_data, "paraphrase/parasci/acl-train")) == 28_883
    # 27,778 images, two disjoint caption pairs each.
    assert (
        sum(1 for _ in iter_pairs(shared_data, "paraphrase/flickr30k-captions/train")) == 2 * 27_778
    )
    mrpc = shared_data / "paraphrase/mrpc/train.tsv"
    positives = sum(
        line.startswith("1\t") for line in mrpc.read_text(encoding="utf-8").splitlines()
    )
    assert sum(1 for _ in iter_pairs(shared_data, "paraphrase/mrpc/train")) == positives


def test_sentences_on_the_mirror(shared_data):
    assert sum(1 for _ in iter_sentences(shared_data, "mono/en/wmt-newstest-en")) == 37_916
    assert (
        sum(1 for _ in iter_sentences(shared_data, "mono/comparable-quijote/quijote.es")) == 5_334
    )
    spanish = list(iter_sentences(shared_data, "bitext/es-en/wmt-newstest.es"))
    assert len(spanish) == 16_350
    first = next(iter_pairs(shared_data, "bitext/es-en/wmt-newstest"))
    assert spanish[0] == (first.src, first.where)
    # A plain path works without a data root.
    path = shared_data / "tatoeba/tatoeba.spa-eng.spa"
    assert sum(1 for _ in iter_sentences(None, path)) == 1000


def test_corpus_files_follow_the_layout(tmp_path):
    assert corpus_files(tmp_path, "bitext/es-en/OpenSubtitles2018") == [
        tmp_path / "bitext/es-en/OpenSubtitles2018.es.gz",
        tmp_path / "bitext/es-en/OpenSubtitles2018.en.gz",
    ]
    assert corpus_files(tmp_path, "tatoeba/tatoeba.deu-eng") == [
        tmp_path / "tatoeba/tatoeba.deu-eng.deu",
        tmp_path / "tatoeba/tatoeba.deu-eng.eng",
    ]
    assert corpus_files(tmp_path, "paraphrase/paranmt/para-nmt-50m") == [
        tmp_path / "paraphrase/paranmt/para-nmt-50m.tsv.gz"
    ]
    assert corpus_files(tmp_path, "paraphrase/mrpc/dev") == [tmp_path / "paraphrase/mrpc/dev.tsv"]
    with pytest.raises(InputError, match="unknown corpus id"):
        corpus_files(tmp_path, "sts/stsb/train")


# ---------------------------------------------------------------------------------------------
# Fixtures: bitext


@pytest.mark.parametrize(("n_es", "n_en"), [(5, 3), (3, 5)])
def test_misaligned_bitext_names_both_files_and_counts(tmp_path, n_es, n_en):
    es = _write(tmp_path / "bitext/es-en/c.es.gz", *[f"es {i}" for i in range(n_es)])
    en = _write(tmp_path / "bitext/es-en/c.en.gz", *[f"en {i}" for i in range(n_en)])
    got = []
    with pytest.raises(InputError) as err:
        for pair in iter_pairs(tmp_path, "bitext/es-en/c"):
            got.append(pair)
    message = str(err.value)
    assert f"{es} has {n_es} lines" in message and f"{en} has {n_en}" in message
    assert [p.src for p in got] == ["es 0", "es 1", "es 2"]  # the aligned prefix came first


def test_invalid_utf8_gives_none_on_that_side(tmp_path):
    _write(tmp_path / "bitext/es-en/c.es.gz", "uno", b"dos \xff\xfe", "tres\tcon tab")
    _write(tmp_path / "bitext/es-en/c.en.gz", "one", "two", b"three \xc3")
    pairs = list(iter_pairs(tmp_path, "bitext/es-en/c", ("es", "en")))
    assert pairs[0] == RawPair("uno", "one", None, f"{tmp_path}/bitext/es-en/c.es.gz:1")
    assert (pairs[1].src, pairs[1].tgt) == (None, "two")
    # A tab inside a sentence is passed on unchanged for the filter to count.
    assert (pairs[2].src, pairs[2].tgt) == ("tres\tcon tab", None)


def test_truncated_gzip_is_an_input_error(tmp_path):
    es = tmp_path / "bitext/es-en/c.es.gz"
    _write(es, *[f"frase número {i}" for i in range(5000)])
    es.write_bytes(es.read_bytes()[:-100])
    _write(tmp_path / "bitext/es-en/c.en.gz", *[f"sentence {i}" for i in range(5000)])
    with pytest.raises(InputError, match="c.es.gz"):
        list(iter_pairs(tmp_path, "bitext/es-en/c"))
    para = tmp_path / "paraphrase/parasci/acl-x.tsv.gz"
    _write(para, *[f"a {i}\tb {i}" for i in range(5000)])
    para.write_bytes(para.read_bytes()[:-100])
    with pytest.raises(InputError, match="acl-x.tsv.gz"):
        list(iter_pairs(tmp_path, "paraphrase/parasci/acl-x"))


# ---------------------------------------------------------------------------------------------
# Fixtures: paraphrase TSVs


def test_paraphrase_tsv_formats(tmp_path):
    _write(tmp_path / "paraphrase/parasci/t.tsv.gz", "a b\tc d", b"\xff\tok")
    assert [(p.src, p.tgt) for p in iter_pairs(tmp_path, "paraphrase/parasci/t")] == [
        ("a b", "c d"),
        (None, "ok"),
    ]
    _write(tmp_path / "paraphrase/paranmt/p.tsv.gz", "ref one\tpara one\t0.83", "r2\tp2\t1e-1")
    paranmt = list(iter_pairs(tmp_path, "paraphrase/paranmt/p"))
    assert [(p.src, p.tgt, p.score) for p in paranmt] == [
        ("ref one", "para one", 0.83),
        ("r2", "p2", 0.1),
    ]
    _write(tmp_path / "paraphrase/flickr30k-captions/s.tsv.gz", "1.jpg\tc1\tc2\tc3\tc4\tc5")
    flickr = list(iter_pairs(tmp_path, "paraphrase/flickr30k-captions/s"))
    # No caption in two pairs: a pair's mined negative is never its own image's caption.
    assert [(p.src, p.tgt) for p in flickr] == [("c1", "c2"), ("c3", "c4")]
    assert {p.where for p in flickr} == {f"{tmp_path}/paraphrase/flickr30k-captions/s.tsv.gz:1"}
    _write(tmp_path / "paraphrase/mrpc/m.tsv", "1\ta\tb", "0\tc\td", "1\te\tf")
    assert [(p.src, p.tgt) for p in iter_pairs(tmp_path, "paraphrase/mrpc/m")] == [
        ("a", "b"),
        ("e", "f"),
    ]


@pytest.mark.parametrize(
    ("corpus", "suffix", "bad_row", "message"),
    [
        (
            "paraphrase/parasci/t",
            ".tsv.gz",
            "only one column",
            "expected 2 tab-separated columns, found 1",
        ),
        ("paraphrase/paranmt/p", ".tsv.gz", "a\tb", "expected 3 tab-separated columns, found 2"),
        ("paraphrase/paranmt/p", ".tsv.gz", "a\tb\thigh", "score b'high' is not a number"),
        ("paraphrase/flickr30k-captions/s", ".tsv.gz", "1.jpg\tc1\tc2", "expected 6"),
        ("paraphrase/mrpc/m", ".tsv", "yes\ta\tb", "MRPC label must be 0 or 1"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path, corpus, suffix, bad_row, message):
    good = {
        "parasci": "a\tb",
        "paranmt": "a\tb\t0.5",
        "flickr30k-captions": "i\t1\t2\t3\t4\t5",
        "mrpc": "1\ta\tb",
    }
    path = _write(tmp_path / f"{corpus}{suffix}", good[corpus.split("/")[1]], bad_row)
    with pytest.raises(InputError, match=f"{path}:2: {message}"):
        list(iter_pairs(tmp_path, corpus))


def test_missing_text_file_is_reported(tmp_path):
    with pytest.raises(InputError, match="no text file for 'mono/en/nothing'"):
        sentence_file(tmp_path, "mono/en/nothing")
    _write(tmp_path / "mono/xx/s.txt.gz", "one", b"\xff", "three")
    assert list(iter_sentences(tmp_path, "mono/xx/s")) == [
        ("one", f"{tmp_path}/mono/xx/s.txt.gz:1"),
        (None, f"{tmp_path}/mono/xx/s.txt.gz:2"),
        ("three", f"{tmp_path}/mono/xx/s.txt.gz:3"),
    ]
