"""The word cache gives exactly SentencePiece's ids, on every text of the data mirror.

For each X-en pair a joint model is trained as the workflow trains one (its settings, fewer
pieces), and every line of every mirror file of X and English (bitext, monolingual text,
paraphrases, STS, STS17, Tatoeba) is encoded through the cache and by SentencePiece sentence by
sentence; a model with byte fallback does the same on every Tatoeba language. Chinese (no
spaces), Arabic (its marks deleted first), tabs, no-break spaces and unknown characters are all
in there. On the same text, the lattice that cuts new words and says which may tie gives the gap
between each distinct word's two best cuts that SentencePiece's own n-best search scores, and the
best cut SentencePiece gives the word wherever the cache keeps it.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from psp.data.spm_training import spm_settings, train_spm
from psp.model.byte_table import joined
from psp.model.piece_encoder import PieceEncoder
from psp.model.text import model_text
from psp.model.unigram_ties import piece_lattice
from psp.model.word_pieces import TIE, WordPieces, cache_is_exact, pieces_arrays

PAIRS = ("ar", "de", "es", "fr", "ru", "tr", "zh")


def text_columns(path: Path) -> list[str]:
    """The text of a mirror file: each line, or a TSV line's fields that are not numbers."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        lines = handle.read().split("\n")
    if ".tsv" not in path.name:
        return lines
    fields = (field for line in lines for field in line.split("\t"))
    return [field for field in fields if not field.replace(".", "", 1).isdigit()]


def files_of(root: Path, language: str) -> list[Path]:
    """Every mirror file holding text of ``language`` and, for a foreign language, the English
    side of its bitext and Tatoeba (``en``: every English file)."""
    code = {"ar": "ara", "de": "deu", "es": "spa", "fr": "fra", "ru": "rus", "tr": "tur"}
    if language == "en":
        found = sorted(root.glob("bitext/*/*.en.gz")) + sorted(root.glob("tatoeba/*.eng"))
        found += sorted(root.glob("mono/**/*.txt.gz")) + sorted(root.glob("paraphrase/**/*.tsv.gz"))
        found += sorted(root.glob("sts/en/*/*.tsv")) + sorted(root.glob("sts/stsb/*.tsv"))
        return found + [root / "sts/sts17/en-en.tsv"]
    tatoeba = code.get(language, "cmn")
    found = sorted(root.glob(f"bitext/{language}-en/*.gz"))
    found += sorted(root.glob(f"tatoeba/tatoeba.{tatoeba}-eng.*"))
    found += sorted(root.glob(f"sts/sts17/*{language}*.tsv"))
    if language == "es":
        found += sorted(root.glob("mono/comparable-quijote/*.txt.gz"))
    return [p for p in found if not p.name.endswith(".origin.gz")]


def assert_cache_exact(encoder: PieceEncoder, lines: list[str]) -> None:
    texts = model_text(lines)
    assert encoder._words is not None, "the model should allow the cache"
    cached = WordPieces(encoder._sp)
    for start in range(0, len(texts), 8192):
        batch = texts[start : start + 8192]
        plain_flat, plain_lengths = pieces_arrays(encoder._sp.encode(batch, out_type=int))
        flat, lengths = cached.encode(batch)
        if not (np.array_equal(flat, plain_flat) and np.array_equal(lengths, plain_lengths)):
            ends = np.cumsum(plain_lengths)
            bad = next(
                i
                for i, (a, b) in enumerate(zip(np.cumsum(lengths), ends))
                if a != b
                or not np.array_equal(
                    flat[a - lengths[i] : a], plain_flat[b - plain_lengths[i] : b]
                )
            )
            raise AssertionError(f"cache differs from SentencePiece on {batch[bad]!r}")
    # The encoder itself, through the compiled model text, against the plain path.
    plain = PieceEncoder(encoder.model_bytes)
    plain._words = None
    for a, b in zip(encoder.encode(lines), plain.encode(lines)):
        assert np.array_equal(a, b)
    assert_lattice_gaps(encoder, sorted({word for text in texts for word in text.split()}))


def nbest_gaps(processor, words: list[str]) -> np.ndarray:
    """SentencePiece's score of each word's best cut less its second best's (inf: one cut)."""
    found = processor.nbest_encode(words, nbest_size=2, return_type="proto")
    return np.array(
        [c.nbests[0].score - c.nbests[1].score if len(c.nbests) > 1 else np.inf for c in found]
    )


def assert_lattice_gaps(encoder: PieceEncoder, words: list[str]) -> None:
    """:class:`PieceLattice`'s gaps are SentencePiece's, to float32 rounding, on ``words``, and
    its best cut is SentencePiece's wherever the cache would keep it (no tie, no unknown)."""
    ids, lengths, gaps, unknown = piece_lattice(encoder._sp).cuts(words)
    assert not lengths[unknown].any(), "a cut through an unknown character is left out"
    kept = (gaps >= TIE) & ~unknown
    expected_ids, expected_lengths = pieces_arrays(encoder._sp.encode(words, out_type=int))
    starts, expected_starts = (
        np.cumsum(lengths) - lengths,
        np.cumsum(expected_lengths) - expected_lengths,
    )
    for k in np.flatnonzero(kept):
        got = ids[starts[k] : starts[k] + lengths[k]]
        want = expected_ids[expected_starts[k] : expected_starts[k] + expected_lengths[k]]
        assert np.array_equal(got, want), f"{words[k]!r}: lattice cut {got}, SentencePiece {want}"
    expected = nbest_gaps(encoder._sp, words)
    one_cut = np.isinf(expected)
    assert np.array_equal(np.isinf(gaps), one_cut), "words with one cut differ"
    differences = np.zeros(len(words))
    differences[~one_cut] = np.abs(gaps[~one_cut] - expected[~one_cut])
    worst = int(np.argmax(differences)) if len(words) else 0
    assert differences.max(initial=0.0) < 1e-3, (
        f"{words[worst]!r}: lattice gap {gaps[worst]}, SentencePiece {expected[worst]}"
    )


@pytest.mark.parametrize("language", [*PAIRS, "en"])
def test_word_cache_is_sentencepiece_on_every_mirror_text(language, shared_data, tmp_path):
    lines = [t for f in files_of(shared_data, language) for t in text_columns(f)]
    settings = spm_settings({"vocab_size": 4000}, [language, "en"])
    model = train_spm(lines[::10], tmp_path / "spm.model", **settings)
    assert_cache_exact(PieceEncoder(model), lines)


def test_word_cache_is_sentencepiece_with_byte_fallback_on_every_tatoeba_language(
    shared_data, tmp_path
):
    lines = [t for f in sorted(shared_data.glob("tatoeba/tatoeba.*")) for t in text_columns(f)]
    model = train_spm(
        lines[::5],
        tmp_path / "spm.model",
        vocab_size=4000,
        byte_fallback=True,
        character_coverage=0.9995,
    )
    assert_cache_exact(PieceEncoder(model), lines)


def test_a_word_with_a_user_defined_piece_is_left_to_sentencepiece(tmp_path, news):
    """SentencePiece scores a user-defined piece with a bonus of its own: the lattice does not
    guess it, and the cache leaves such words to SentencePiece's whole-sentence search."""
    import sentencepiece as spm

    prefix = tmp_path / "spm"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(model_text(news)),
        model_prefix=str(prefix),
        vocab_size=500,
        user_defined_symbols=["<x>", "qq"],
        minloglevel=2,
    )
    encoder = PieceEncoder(Path(f"{prefix}.model"))
    gaps = piece_lattice(encoder._sp).gaps(["a<x>b", "qq", "<x>", "the"])
    assert list(np.isneginf(gaps)) == [True, True, True, False]
    lines = [f"{line} a<x>b qq" for line in news[:200]] + news[200:400]
    cached = WordPieces(encoder._sp)
    texts = model_text(lines)
    assert np.array_equal(
        np.concatenate(cached.encode(texts)),
        np.concatenate(pieces_arrays(encoder._sp.encode(texts, out_type=int))),
    )


def test_encoder_gives_the_same_ids_with_and_without_the_cache(shared_data, spm_path):
    """Unknowns dropped, textless sentences, max_pieces, sentences encoded whole: the encoder's
    output is the same."""
    news = [t for t in text_columns(shared_data / "mono/en/wmt-newstest-en.txt.gz")][:5000]
    news += ["", "   ", "\u2603\u2603", "a\u00a0b\tc", "x" * 300]
    # Encoded whole (a tab, a no-break space) with their mapped text, or with model_text's where
    # the mapping leaves them (a capital sigma, a tag character), in one batch.
    news += ["ΟΔΟΣ\tΚΑΙ", "İSTANBUL\tDE", "Tag\U000e0041\u00a0X", "Straße\tÉTÉ", "ΣΑΣ ok"]
    for max_pieces in (None, 7):
        cached, plain = (
            PieceEncoder(spm_path, max_pieces=max_pieces),
            PieceEncoder(spm_path, max_pieces=max_pieces),
        )
        plain._words = None
        for a, b in zip(cached.encode(news), plain.encode(news)):
            assert np.array_equal(a, b)


def test_a_model_that_does_not_cut_at_spaces_is_encoded_whole(tmp_path, news):
    model = train_spm(news, tmp_path / "spm.model", vocab_size=500)
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.read_bytes())
    assert cache_is_exact(model.read_bytes())
    proto.trainer_spec.split_by_whitespace = False
    assert not cache_is_exact(proto.SerializeToString())
    assert PieceEncoder(proto.SerializeToString())._words is None


def test_the_cache_keeps_at_most_its_capacity_and_stays_exact(spm_path, news):
    encoder = PieceEncoder(spm_path)
    small = WordPieces(encoder._sp, capacity=500)
    texts = model_text(news)
    for start in range(0, len(texts), 1000):
        batch = texts[start : start + 1000]
        flat, lengths = small.encode(batch)
        plain = pieces_arrays(encoder._sp.encode(batch, out_type=int))
        assert np.array_equal(flat, plain[0]) and np.array_equal(lengths, plain[1])
        assert small.words == 500  # the first batch has more new words than that
        table = small.table
        assert len(table.ids) == int(table.lengths.sum()) and len(table.tied) == 500


def test_threads_filling_one_cache_at_once_get_sentencepiece_ids(spm_path, news):
    """Lookups take no lock: threads encoding through one cold cache, each its own slice,
    get SentencePiece's ids while the cache grows under them."""
    from concurrent.futures import ThreadPoolExecutor

    encoder = PieceEncoder(spm_path)
    texts = model_text(news)
    slices = [texts[i : i + 500] for i in range(0, len(texts), 500)] * 2
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(encoder._words.encode, slices))
    for batch, (flat, lengths) in zip(slices, results):
        plain = pieces_arrays(encoder._sp.encode(batch, out_type=int))
        assert np.array_equal(flat, plain[0]) and np.array_equal(lengths, plain[1])


def test_a_table_taken_before_the_cache_grew_still_answers_with_its_own_words(spm_path, news):
    """The cache grows in place (new words appended, their slots filled in the same array
    until it fills up): a lookup through an older table finds its words where they were and
    never a word added after it."""
    from psp.model._loops import find_words as _find_words

    words = PieceEncoder(spm_path)._words
    texts = model_text(news)
    batches = [texts[:300], texts[300:400], texts[400:500], texts[500:1500]]
    words.encode(batches[0])
    tables = [words.table]
    for batch in batches[1:]:
        words.encode(batch)
        tables.append(words.table)
    # The third batch's words went into the second table's slots and arrays (past its items),
    # the last batch's into new ones.
    assert tables[2].slots is tables[1].slots and tables[3].slots is not tables[2].slots
    assert np.shares_memory(tables[2].word_hashes, tables[1].word_hashes)
    last = tables[-1]
    for older in tables[:-1]:
        known = len(older.word_hashes)
        assert np.array_equal(last.word_hashes[:known], older.word_hashes)
        for batch in batches:
            old_found = _find_words(*utf8(batch), *older.keys)[3]
            new_found = _find_words(*utf8(batch), *last.keys)[3]
            assert old_found.max() < known
            kept = old_found >= 0  # found through the older table: at the same index in both
            assert np.array_equal(old_found[kept], new_found[kept])
            assert (new_found >= 0).all()
        assert (_find_words(*utf8(batches[0]), *older.keys)[3] >= 0).all()


def utf8(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``texts`` as one UTF-8 buffer and each text's start (the lookup's input)."""
    return joined([text.encode("utf-8") for text in texts])
