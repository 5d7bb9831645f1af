"""Read training corpora and monolingual text from the mirror layout as a stream of raw pairs,
and the data stage's clean pairs back.

Everything here is a streaming reader: nothing holds a corpus in memory, so a 4M-pair OPUS
corpus and a 2k-line test set go through the same code. Readers report, they do not judge:
a line that is not valid UTF-8 becomes ``None`` on its side, and a sentence with a tab in it is
passed on unchanged, so the filter stage can count each reason for dropping a pair. What *is*
an error here is a file whose shape is wrong (misaligned sides, a row with the wrong number of
columns, a truncated gzip), reported as :class:`psp.io.InputError` naming the file and line.

Corpus ids are paths in the mirror layout (docs/design.md §3), for example ``bitext/es-en/wmt-newstest``,
``tatoeba/tatoeba.spa-eng``, ``paraphrase/parasci/acl-train``, ``paraphrase/paranmt/para-nmt-50m``.
The filters' output, ``pairs.tsv.gz``, is read back by :func:`iter_pair_lines`, which is strict
instead: every later step takes its lines as pairs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from psp.data.sentence_files import Fields, iter_records
from psp.io import InputError, iter_lines, iter_raw_lines


@dataclass(slots=True)
class RawPair:
    """One candidate training pair as read; ``None`` on a side whose line is not valid UTF-8.

    ``where`` is ``file:line`` of the source line, so any later report can point back at it.
    Not frozen: a frozen dataclass costs ~5 µs per instance, a third of the read time.
    """

    src: str | None
    tgt: str | None
    score: float | None
    where: str


# Paraphrase corpora: folder -> (file suffix, number of columns)
_TSV_CORPORA = {
    "parasci": (".tsv.gz", 2),  # sent1, sent2
    "flickr30k-captions": (".tsv.gz", 6),  # image id, five captions
    "paranmt": (".tsv.gz", 3),  # reference, paraphrase, score
    "mrpc": (".tsv", 3),  # label, sent1, sent2
}


def _kind(corpus_id: str) -> str:
    parts = corpus_id.strip("/").split("/")
    if parts[0] == "paraphrase" and len(parts) == 3 and parts[1] in _TSV_CORPORA:
        return parts[1]
    if parts[0] in ("bitext", "tatoeba") and len(parts) >= 2:
        return parts[0]
    raise InputError(
        f"unknown corpus id {corpus_id!r}: expected bitext/{{xx}}-en/{{corpus}}, tatoeba/tatoeba.{{xxx}}-eng "
        f"or paraphrase/{{{','.join(_TSV_CORPORA)}}}/{{split}}"
    )


def _languages(corpus_id: str, languages: Sequence[str] | None) -> tuple[str, str]:
    """The two sides of a parallel corpus; by default taken from its folder (``es-en``) or name.

    Languages naming one language twice (an English paraphrase model, ``("en", "en")``) also
    take the corpus's own pair: such a model reads a bitext corpus as (foreign, English)
    translation pairs, paraphrase supervision for its English side, where reading the English
    file twice would pair every sentence with itself.
    """
    if languages is not None:
        if len(languages) != 2:
            raise ValueError(
                f"{corpus_id}: a parallel corpus needs two languages, got {languages!r}"
            )
        if languages[0] != languages[1]:
            return languages[0], languages[1]
    pair = (
        corpus_id.split("/")[1] if corpus_id.startswith("bitext/") else corpus_id.rsplit(".", 1)[-1]
    )
    src, _, tgt = pair.partition("-")
    if not src or not tgt:
        raise ValueError(f"{corpus_id}: cannot tell the languages from the id; pass languages=")
    return src, tgt


def corpus_files(
    data_root: str | os.PathLike, corpus_id: str, languages: Sequence[str] | None = None
) -> list[Path]:
    """The files :func:`iter_pairs` reads for a corpus, whether or not they exist yet.

    The workflow names them as rule inputs, so the answer depends on the layout alone.
    """
    root = Path(data_root)
    kind = _kind(corpus_id)
    if kind in _TSV_CORPORA:
        return [root / f"{corpus_id}{_TSV_CORPORA[kind][0]}"]
    suffix = ".gz" if kind == "bitext" else ""
    return [root / f"{corpus_id}.{lang}{suffix}" for lang in _languages(corpus_id, languages)]


def _decode(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def iter_pairs(
    data_root: str | os.PathLike, corpus_id: str, languages: Sequence[str] | None = None
) -> Iterator[RawPair]:
    """Stream the pairs of a corpus in the mirror layout.

    Args:
        data_root: the mirror (or imported data) root.
        corpus_id: e.g. ``bitext/es-en/wmt-newstest``; see the module docstring.
        languages: for a parallel corpus, ``(src, tgt)`` in the order wanted (``("en", "es")``
            swaps the sides); ignored for paraphrase corpora, which are English.

    Raises:
        InputError: sides of different lengths (raised once the shorter side is exhausted,
            after the aligned pairs), a row with the wrong number of columns, a truncated gzip.
    """
    kind = _kind(corpus_id)
    files = corpus_files(data_root, corpus_id, languages)
    if kind in _TSV_CORPORA:
        yield from _iter_tsv(files[0], kind)
    else:
        yield from _iter_aligned(files[0], files[1])


def _iter_aligned(src_path: Path, tgt_path: Path) -> Iterator[RawPair]:
    prefix = f"{src_path}:"
    n_src = n_tgt = 0
    # zip_longest keeps reading the longer side, so both totals are known for the error.
    for src, tgt in zip_longest(iter_raw_lines(src_path), iter_raw_lines(tgt_path)):
        if src is not None:
            n_src = src[0]
        if tgt is not None:
            n_tgt = tgt[0]
        if src is not None and tgt is not None:
            yield RawPair(_decode(src[1]), _decode(tgt[1]), None, f"{prefix}{n_src}")
    if n_src != n_tgt:
        raise InputError(
            f"{src_path} has {n_src} lines but {tgt_path} has {n_tgt}: the sides are not line-aligned"
        )


def _iter_tsv(path: Path, kind: str) -> Iterator[RawPair]:
    n_cols = _TSV_CORPORA[kind][1]
    for lineno, raw in iter_raw_lines(path):
        where = f"{path}:{lineno}"
        cols = raw.split(b"\t")
        if len(cols) != n_cols:
            raise InputError(f"{where}: expected {n_cols} tab-separated columns, found {len(cols)}")
        if kind == "parasci":
            yield RawPair(_decode(cols[0]), _decode(cols[1]), None, where)
        elif kind == "paranmt":
            yield RawPair(_decode(cols[0]), _decode(cols[1]), _number(cols[2], where), where)
        elif kind == "mrpc":
            label = cols[0].strip()
            if label not in (b"0", b"1"):
                raise InputError(f"{where}: MRPC label must be 0 or 1, found {label[:10]!r}")
            if label == b"1":
                yield RawPair(_decode(cols[1]), _decode(cols[2]), None, where)
        else:  # flickr30k-captions: five independent captions of one image
            captions = [_decode(col) for col in cols[1:]]
            yield from (RawPair(a, b, None, where) for a, b in _disjoint_pairs(captions))


def _disjoint_pairs(captions: list[str | None]) -> list[tuple[str | None, str | None]]:
    """Two pairs from five captions of one image, no caption in both: ``(c1, c2), (c3, c4)``.

    Training mines each pair's hardest negative among the other pairs of its mega-batch. A
    caption in several pairs (all ten pairs of five captions put each in four) makes a
    mega-batch that holds two pairs of one image mine a paraphrase of the anchor, or the anchor
    itself, as its "negative". Measured with ParaSCI, STS-B dev ρ after epochs 1, 2, 3: all ten
    pairs 56.6, 41.4, 33.9; these two 69.8, 73.6, 75.5. Masking the pairs of one image as each
    other's negatives does not rescue the ten (a trial trainer: 76.5, 72.1, 55.7 on the whole
    English corpus), so the false negatives are not the only cause; see the README.
    """
    return [(captions[0], captions[1]), (captions[2], captions[3])]


def _number(raw: bytes, where: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise InputError(f"{where}: score {raw[:20]!r} is not a number") from None


_TEXT_SUFFIXES = ("", ".gz", ".txt", ".txt.gz")


def sentence_file(data_root: str | os.PathLike | None, mono_id_or_path: str | os.PathLike) -> Path:
    """The file behind a monolingual id, or the path itself when it names an existing file.

    Ids are mirror paths without suffix: ``mono/en/wmt-newstest-en`` (→ ``.txt.gz``),
    ``mono/comparable-quijote/quijote.es``, or one side of a bitext, ``bitext/es-en/wmt-newstest.es``.
    """
    given = Path(mono_id_or_path)
    if given.is_file():
        return given
    if data_root is not None:
        for suffix in _TEXT_SUFFIXES:
            candidate = Path(data_root) / f"{mono_id_or_path}{suffix}"
            if candidate.is_file():
                return candidate
    raise InputError(
        f"no text file for {str(mono_id_or_path)!r}"
        + (
            f" under {data_root} (tried suffixes {', '.join(map(repr, _TEXT_SUFFIXES))})"
            if data_root
            else ""
        )
    )


def iter_sentences(
    data_root: str | os.PathLike | None,
    mono_id_or_path: str | os.PathLike,
    fields: Fields = Fields(),
) -> Iterator[tuple[str | None, str]]:
    """Stream ``(sentence, "file:line")`` from monolingual text, or from JSON Lines or Parquet
    records (their ``fields.text``; :mod:`psp.data.sentence_files`); ``None`` for invalid UTF-8."""
    path = sentence_file(data_root, mono_id_or_path)
    for record in iter_records(path, fields):
        yield record.text, f"{path}:{record.number}"


def iter_pair_lines(path: str | os.PathLike) -> Iterator[tuple[int, str, str]]:
    """Yield ``(line_number, src, tgt)`` from a ``src<TAB>tgt`` file (plain or ``.gz``).

    A line without exactly one tab is an :class:`InputError` naming ``file:line``, because a
    silently skipped or mis-split line would misalign every pair after it.
    """
    for lineno, line in iter_lines(path):
        parts = line.split("\t")
        if len(parts) != 2:
            raise InputError(
                f"{path}:{lineno}: expected 'src<TAB>tgt' (exactly one tab), found {len(parts) - 1}"
            )
        yield lineno, parts[0], parts[1]
