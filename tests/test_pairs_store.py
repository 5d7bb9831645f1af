"""Training HDF5: exact round trip through the on-disk shuffle, slicing, and layout checks."""

from __future__ import annotations

import gzip
import itertools
import math
from collections import Counter

import h5py
import numpy as np
import pytest
import sentencepiece as spm

from psp.data.pairs_store import LAYOUT_VERSION, PairReader, write_pairs
from psp.data.spm_training import train_spm
from psp.io import InputError
from psp.model.piece_encoder import PieceEncoder

N_PAIRS = 1000


def make_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Distinct pairs ("number i" on both sides) with mixed case and a few unknown characters."""
    rng = np.random.default_rng(seed)
    words = ["alpha", "Beta", "gamma", "delta", "épsilon", "zeta", "ETA", "theta", "iota", "kappa"]
    pairs = []
    for i in range(n):
        src = " ".join(rng.choice(words, rng.integers(1, 12))) + f" {i}"
        tgt = (
            f"{i} "
            + " ".join(rng.choice(words, rng.integers(1, 12)))
            + (" 日本" if i % 50 == 0 else "")
        )
        pairs.append((src, tgt))
    return pairs


def write_tsv(path, pairs):
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(f"{s}\t{t}\n" for s, t in pairs)
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A pairs file and the SentencePiece model trained on both of its sides."""
    root = tmp_path_factory.mktemp("hdf5")
    pairs = make_pairs(N_PAIRS)
    tsv = write_tsv(root / "pairs.tsv.gz", pairs)
    model = train_spm(itertools.chain.from_iterable(pairs), root / "pairs.model", vocab_size=60)
    return pairs, tsv, model


def expected_pairs(model, pairs, max_pieces=None) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    enc = PieceEncoder(model, max_pieces=max_pieces)
    sides = [split(*enc.encode([p[k] for p in pairs])) for k in (0, 1)]
    return list(zip(*sides, strict=True))


def split(ids, offsets):
    return [tuple(ids[a:b].tolist()) for a, b in itertools.pairwise(offsets)]


def read_all(path):
    with PairReader(path) as reader:
        batch = reader.read(0, len(reader))
    return list(
        zip(split(batch.src_ids, batch.src_offsets), split(batch.tgt_ids, batch.tgt_offsets))
    )


def datasets(path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as h5:
        return {f"{g}/{d}": h5[g][d][:] for g in ("src", "tgt") for d in ("ids", "offsets")}


def test_round_trip_is_an_exact_shuffle(corpus, tmp_path):
    pairs, tsv, model = corpus
    stats = write_pairs(tsv, model, tmp_path / "out.h5", seed=1, chunk_pairs=128, bucket_pairs=300)
    assert stats["n_pairs"] == N_PAIRS and stats["buckets"] == math.ceil(N_PAIRS / 300)
    expected = expected_pairs(model, pairs)
    got = read_all(tmp_path / "out.h5")
    assert Counter(got) == Counter(expected), "every pair kept, each side with its own partner"
    assert got != expected, "order is shuffled"
    assert stats["src_pieces"] == sum(len(s) for s, _ in expected)
    with PairReader(tmp_path / "out.h5") as reader:
        attrs = reader.attrs
    assert attrs["layout_version"] == LAYOUT_VERSION
    assert attrs["n_pairs"] == N_PAIRS and attrs["languages"] == ["es", "en"]
    assert attrs["spm_sha256"] == PieceEncoder(model).sha256
    assert attrs["vocab_size"] == PieceEncoder(model).vocab_size
    assert attrs["seed"] == 1 and attrs["max_pieces"] is None and attrs["source"] == str(tsv)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.h5"], "no temporary files left"


def test_shuffle_mixes_the_whole_corpus(corpus, tmp_path):
    """Pairs of one input chunk end up spread over the whole file, not kept near each other."""
    pairs, tsv, model = corpus
    write_pairs(tsv, model, tmp_path / "out.h5", seed=0, chunk_pairs=100, bucket_pairs=100)
    sp = spm.SentencePieceProcessor(model_file=str(model))
    got = read_all(tmp_path / "out.h5")
    origin = [int(sp.decode(list(src)).split()[-1]) for src, _ in got]
    assert sorted(origin) == list(range(N_PAIRS))
    first_bucket = origin[:100]
    assert max(first_bucket) - min(first_bucket) > N_PAIRS // 2
    assert len({i // 100 for i in first_bucket}) >= 8, "drawn from most input chunks"
    assert max(i % 100 for i in first_bucket) > 50, "and from anywhere inside a chunk"


def test_same_seed_same_content(corpus, tmp_path):
    _, tsv, model = corpus
    kwargs = dict(chunk_pairs=200, bucket_pairs=250)
    write_pairs(tsv, model, tmp_path / "a.h5", seed=5, **kwargs)
    write_pairs(tsv, model, tmp_path / "b.h5", seed=5, compression="lzf", **kwargs)
    write_pairs(tsv, model, tmp_path / "c.h5", seed=6, **kwargs)
    a, b, c = (datasets(tmp_path / name) for name in ("a.h5", "b.h5", "c.h5"))
    assert all(np.array_equal(a[key], b[key]) for key in a)
    assert not np.array_equal(a["src/offsets"], c["src/offsets"])
    with PairReader(tmp_path / "b.h5") as reader:
        assert reader.attrs["compression"] == "lzf"


def test_many_tiny_buckets_still_exact(corpus, tmp_path):
    pairs, tsv, model = corpus
    stats = write_pairs(tsv, model, tmp_path / "out.h5", chunk_pairs=13, bucket_pairs=7)
    assert stats["buckets"] == math.ceil(N_PAIRS / 7)
    assert Counter(read_all(tmp_path / "out.h5")) == Counter(expected_pairs(model, pairs))


def test_max_pieces_truncates(corpus, tmp_path):
    pairs, tsv, model = corpus
    write_pairs(tsv, model, tmp_path / "out.h5", max_pieces=4, languages=("en", "en"))
    got = read_all(tmp_path / "out.h5")
    assert Counter(got) == Counter(expected_pairs(model, pairs, max_pieces=4))
    assert max(len(s) for pair in got for s in pair) == 4
    with PairReader(tmp_path / "out.h5") as reader:
        assert reader.attrs["max_pieces"] == 4 and reader.attrs["languages"] == ["en", "en"]


def test_reader_slices(corpus, tmp_path):
    _, tsv, model = corpus
    write_pairs(tsv, model, tmp_path / "out.h5", compression="lzf")
    full = read_all(tmp_path / "out.h5")
    with PairReader(tmp_path / "out.h5") as reader:
        assert len(reader) == N_PAIRS
        for start, stop in [(0, 0), (0, 1), (3, 17), (499, 500), (1, N_PAIRS), (N_PAIRS, N_PAIRS)]:
            batch = reader.read(start, stop)
            assert batch.n_pairs == stop - start
            assert batch.src_offsets[0] == 0 and batch.tgt_offsets[0] == 0
            assert batch.src_offsets.dtype == np.int64 and batch.src_ids.dtype == np.int32
            assert len(batch.src_ids) == batch.src_offsets[-1]
            pairs = list(
                zip(
                    split(batch.src_ids, batch.src_offsets), split(batch.tgt_ids, batch.tgt_offsets)
                )
            )
            assert pairs == full[start:stop]
        chunks = list(reader.iter_chunks(77, start=10))
        assert [start for start, _ in chunks] == list(range(10, N_PAIRS, 77))
        assert chunks[-1][1].n_pairs == (N_PAIRS - 10) % 77
        rebuilt = [
            p
            for _, b in chunks
            for p in zip(split(b.src_ids, b.src_offsets), split(b.tgt_ids, b.tgt_offsets))
        ]
        assert rebuilt == full[10:]
        for start, stop in [(-1, 3), (5, 4), (0, N_PAIRS + 1)]:
            with pytest.raises(IndexError):
                reader.read(start, stop)


def _write_foreign(path, version=None, offsets=True):
    with h5py.File(path, "w") as h5:
        if version is not None:
            h5.attrs.update({"layout_version": version, "n_pairs": 2, "languages": ["es", "en"]})
            h5.attrs.update({"spm_sha256": "0" * 64, "vocab_size": 10})
        for side in ("src", "tgt"):
            h5.create_dataset(f"{side}/ids", data=np.array([1, 2, 3], dtype=np.int32))
            if offsets:
                h5.create_dataset(f"{side}/offsets", data=np.array([0, 1, 3], dtype=np.int64))


@pytest.mark.parametrize(
    ("version", "offsets", "message"),
    [
        (None, False, "no 'layout_version'"),
        (0, True, "layout_version is 0"),
        (LAYOUT_VERSION, False, "'src/offsets' is missing"),
    ],
)
def test_older_layout_is_refused(tmp_path, version, offsets, message):
    path = tmp_path / "old.h5"
    _write_foreign(path, version, offsets)
    with pytest.raises(InputError, match=message) as err:
        PairReader(path)
    assert str(path) in str(err.value)
    _write_foreign(path, LAYOUT_VERSION, True)
    assert len(PairReader(path)) == 2, "the same file with the current layout opens"


def test_not_hdf5_is_refused(tmp_path):
    path = tmp_path / "pairs.h5"
    path.write_text("src\ttgt\n")
    with pytest.raises(InputError, match="not a readable HDF5 file"):
        PairReader(path)


@pytest.mark.parametrize("bad", ["no tab", "a\tb\tc", ""])
def test_bad_line_leaves_nothing_behind(corpus, tmp_path, bad):
    pairs, _, model = corpus
    lines = [f"{s}\t{t}" for s, t in pairs[:300]]
    lines[250] = bad
    tsv = tmp_path / "bad.tsv.gz"
    with gzip.open(tsv, "wt") as handle:
        handle.write("\n".join(lines) + "\n")
    out = tmp_path / "out" / "pairs.h5"
    with pytest.raises(InputError, match=r"bad\.tsv\.gz:251: "):
        write_pairs(tsv, model, out, chunk_pairs=100, bucket_pairs=50)
    assert list(out.parent.iterdir()) == []


def test_empty_input_is_an_error(corpus, tmp_path):
    _, _, model = corpus
    tsv = write_tsv(tmp_path / "empty.tsv.gz", [])
    with pytest.raises(InputError, match="no pairs"):
        write_pairs(tsv, model, tmp_path / "out.h5")
    assert not (tmp_path / "out.h5").exists()


def test_real_bitext_round_trip(shared_data, tmp_path):
    """2,000 real es-en news pairs: exact multiset round trip through 4 buckets."""
    folder = shared_data / "bitext" / "es-en"
    with (
        gzip.open(folder / "wmt-newstest.es.gz", "rt") as es,
        gzip.open(folder / "wmt-newstest.en.gz", "rt") as en,
    ):
        pairs = [(s.rstrip("\n"), t.rstrip("\n")) for s, t in itertools.islice(zip(es, en), 2000)]
    tsv = write_tsv(tmp_path / "pairs.tsv.gz", pairs)
    model = train_spm(
        itertools.chain.from_iterable(pairs), tmp_path / "esen.model", vocab_size=1000
    )
    write_pairs(tsv, model, tmp_path / "out.h5", bucket_pairs=500, chunk_pairs=300, num_threads=2)
    assert Counter(read_all(tmp_path / "out.h5")) == Counter(expected_pairs(model, pairs))
