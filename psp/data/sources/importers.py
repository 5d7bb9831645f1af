"""Importers: one per upstream format, each writing mirror-layout files atomically;
:func:`import_source` picks the right one for a :class:`~psp.data.sources.registry.Source`."""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import random
import re
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import zip_longest
from pathlib import Path
from typing import IO

from tqdm import tqdm

from psp.data.sources.registry import (
    _STS17_INPUT_LONGER,
    STS17_TRACKS,
    Source,
    SourceError,
)
from psp.io import InputError, atomic_open

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Importers: upstream format -> mirror layout

_ARCHIVE_ERRORS = (
    zipfile.BadZipFile,
    tarfile.TarError,
    EOFError,
    zlib.error,
    gzip.BadGzipFile,
)


@contextlib.contextmanager
def _reading(path: str | os.PathLike) -> Iterator[None]:
    """Turn the zoo of truncated/corrupt-archive exceptions into one InputError naming the file."""
    try:
        yield
    except _ARCHIVE_ERRORS as err:
        raise InputError(f"{path}: corrupt or truncated archive: {err}") from err


def _collapse(text: str) -> str:
    """Whitespace inside a sentence collapsed to single spaces, as in the mirror's eval sets."""
    return " ".join(text.split())


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{where}: invalid UTF-8 ({err.reason})") from err


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    for raw in stream:
        yield raw.rstrip(b"\r\n")


def _zip_names(zf: zipfile.ZipFile) -> list[str]:
    """Member names, without macOS resource-fork twins (``__MACOSX/``, ``._name``)."""
    return [
        n
        for n in zf.namelist()
        if not n.startswith("__MACOSX/") and not n.rsplit("/", 1)[-1].startswith("._")
    ]


def _zip_member(zf: zipfile.ZipFile, path: Path, pattern: str) -> str:
    """The single member whose base name matches ``pattern``; anything else names the archive."""
    names = [n for n in _zip_names(zf) if re.fullmatch(pattern, n.rsplit("/", 1)[-1])]
    if len(names) != 1:
        raise InputError(
            f"{path}: expected one member matching {pattern!r}, found {names or 'none'} among {zf.namelist()[:10]}"
        )
    return names[0]


def import_opus_moses_zip(
    zip_path: str | os.PathLike,
    out_root: str | os.PathLike,
    *,
    corpus_id: str,
    langs: Sequence[str],
    max_pairs: int | None = None,
    codes: dict[str, str] | None = None,
    seed: int = 1234,
) -> list[Path]:
    """OPUS ``moses/{l1}-{l2}.txt.zip`` -> ``{corpus_id}.{xx}.gz`` + ``{corpus_id}.en.gz``.

    Lines are copied byte for byte (the corpus readers decide what invalid UTF-8 means). With
    ``max_pairs``, a uniform random sample of that many pairs is kept, in corpus order, chosen
    by ``seed``: a first pass counts the lines, then selection sampling decides line by line,
    so memory stays constant whatever the corpus size.

    Args:
        corpus_id: the mirror id, e.g. ``bitext/es-en/OpenSubtitles2018``.
        langs: the layout's language codes, e.g. ``("es", "en")``.
        codes: layout code -> OPUS code where they differ (``{"zh": "zh_cn"}``).
    """
    zip_path, out_root = Path(zip_path), Path(out_root)
    codes = codes or {}
    outs = [out_root / f"{corpus_id}.{lang}.gz" for lang in langs]
    with _reading(zip_path), zipfile.ZipFile(zip_path) as zf:
        members = [
            _zip_member(zf, zip_path, r".+\.[^.]+-[^.]+\." + re.escape(codes.get(lang, lang)))
            for lang in langs
        ]
        n_lines = [_count_lines(zf, m) for m in members] if max_pairs is not None else None
        if n_lines is not None and n_lines[0] != n_lines[1]:
            raise _count_mismatch(zip_path, members, n_lines)
        take = None
        if n_lines is not None and n_lines[0] > max_pairs:
            take = _selection_sampler(n_lines[0], max_pairs, seed)
        with (
            zf.open(members[0]) as a,
            zf.open(members[1]) as b,
            atomic_open(outs[0], "wb") as out_a,
            atomic_open(outs[1], "wb") as out_b,
        ):
            counts = _copy_aligned(
                _lines(a), _lines(b), out_a=out_a, out_b=out_b, take=take, desc=corpus_id
            )
            if counts[0] != counts[1]:
                raise _count_mismatch(zip_path, members, counts)
    return outs


def _selection_sampler(n: int, k: int, seed: int) -> Callable[[], bool]:
    """Knuth's selection sampling (TAOCP 3.4.2, algorithm S), one call per item in order.

    Says yes exactly ``k`` times over ``n`` calls, and every ``k``-subset is equally likely.
    """
    rng = random.Random(seed)
    seen = taken = 0

    def take() -> bool:
        nonlocal seen, taken
        yes = rng.random() * (n - seen) < k - taken
        seen += 1
        taken += yes
        return yes

    return take


def _copy_aligned(
    a: Iterator[bytes],
    b: Iterator[bytes],
    *,
    out_a: IO[bytes],
    out_b: IO[bytes],
    take: Callable[[], bool] | None,
    desc: str,
) -> tuple[int, int]:
    """Copy two line streams in lockstep, each pair only if ``take()`` says so (all if None).

    Both streams are read to their end, so a caller can report both line counts on a mismatch.
    """
    n_a = n_b = 0
    for la, lb in tqdm(zip_longest(a, b), desc=desc, unit=" pairs", disable=None):
        n_a += la is not None
        n_b += lb is not None
        if la is None or lb is None or (take is not None and not take()):
            continue
        out_a.write(la + b"\n")
        out_b.write(lb + b"\n")
    return n_a, n_b


def _count_lines(zf: zipfile.ZipFile, member: str) -> int:
    with zf.open(member) as stream:
        return sum(1 for _ in stream)


def _count_mismatch(path: Path, members: Sequence[str], counts: Sequence[int]) -> InputError:
    return InputError(
        f"{path}: members are not line-aligned: {members[0]} has {counts[0]} lines, {members[1]} has {counts[1]}"
    )


def import_paranmt(
    tsv_or_zip: str | os.PathLike, out_root: str | os.PathLike, name: str = "para-nmt-50m"
) -> Path:
    """ParaNMT ``reference<TAB>paraphrase<TAB>score`` (zip or plain/gz tsv) -> layout tsv.gz.

    Rows are copied byte for byte after checking they have three columns and a numeric score,
    so a bad row is reported with its line number instead of surfacing later in training.
    """
    path = Path(tsv_or_zip)
    out = Path(out_root) / "paraphrase" / "paranmt" / f"{name}.tsv.gz"
    with contextlib.ExitStack() as stack:
        stack.enter_context(_reading(path))
        if zipfile.is_zipfile(path):
            zf = stack.enter_context(zipfile.ZipFile(path))
            member = _zip_member(zf, path, r"(?i)para-?nmt.*\.(txt|tsv)")
            stream, where = stack.enter_context(zf.open(member)), f"{path}!{member}"
        else:
            stream = stack.enter_context(
                gzip.open(path) if path.suffix == ".gz" else open(path, "rb")
            )
            where = str(path)
        with atomic_open(out, "wb") as dst:
            for lineno, raw in enumerate(
                tqdm(_lines(stream), desc=name, unit=" pairs", disable=None), 1
            ):
                cols = raw.split(b"\t")
                if len(cols) != 3:
                    raise InputError(
                        f"{where}:{lineno}: expected 3 tab-separated columns, found {len(cols)}"
                    )
                try:
                    float(cols[2])
                except ValueError:
                    raise InputError(
                        f"{where}:{lineno}: score {cols[2][:20]!r} is not a number"
                    ) from None
                dst.write(raw + b"\n")
    return out


def _score(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{where}: score {text[:20]!r} is not a number") from None


def _write_sts(out: Path, rows: Iterable[tuple[float, str, str]]) -> Path:
    with atomic_open(out, "wt") as dst:
        for score, s1, s2 in rows:
            dst.write(f"{score:g}\t{_collapse(s1)}\t{_collapse(s2)}\n")
    return out


def _member_text(zf: zipfile.ZipFile, path: Path, member: str) -> tuple[str, list[str]]:
    """The decoded lines of a zip member, and the ``archive!member`` name errors use."""
    where = f"{path}!{member}"
    with zf.open(member) as stream:
        lines = [_decode(raw, f"{where}:{i}") for i, raw in enumerate(_lines(stream), 1)]
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return where, lines


def _scored_pairs(
    inputs: tuple[str, list[str]], golds: tuple[str, list[str]], allow_longer_input: bool = False
) -> list[tuple[float, str, str]]:
    """Join an STS input file (sent1<TAB>sent2[<TAB>...]) with its gold file, line by line.

    Both arguments come from :func:`_member_text`. An empty gold line marks a pair the
    organisers did not score; it is dropped.
    """
    (in_name, in_lines), (gs_name, gs_lines) = inputs, golds
    if len(in_lines) != len(gs_lines) and not (
        allow_longer_input and len(in_lines) > len(gs_lines)
    ):
        raise InputError(f"{in_name} has {len(in_lines)} lines but {gs_name} has {len(gs_lines)}")
    rows = []
    for i, (line, gold) in enumerate(zip(in_lines, gs_lines), 1):
        if not gold.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 2:
            raise InputError(
                f"{in_name}:{i}: expected sent1<TAB>sent2, found {len(cols)} column(s)"
            )
        rows.append((_score(gold, f"{gs_name}:{i}"), cols[0], cols[1]))
    return rows


def import_senteval_sts(
    zip_path: str | os.PathLike, out_root: str | os.PathLike, year: int | None = None
) -> list[Path]:
    """A SemEval STS 2012-2016 English test zip -> ``sts/en/STS{year}/{dataset}.tsv``.

    Datasets are found by name: ``STS.input.{d}.txt`` (2016: ``STS2016.input.{d}.txt``) with
    its gold ``STS.gs.{d}.txt``. A gold file without input (2013 SMT, LDC-restricted) or an
    input without gold is skipped.
    """
    zip_path = Path(zip_path)
    if year is None:
        found = re.search(r"STS(\d{4})", zip_path.name)
        if not found:
            raise SourceError(f"{zip_path}: cannot tell the STS year from the name; pass year=")
        year = int(found.group(1))
    written = []
    with _reading(zip_path), zipfile.ZipFile(zip_path) as zf:
        members = {}
        for name in _zip_names(zf):
            m = re.fullmatch(r"STS(?:\d{4})?\.(input|gs)\.(.+)\.txt", name.rsplit("/", 1)[-1])
            if m and m.group(2) != "ALL":
                members.setdefault(m.group(2), {})[m.group(1)] = name
        for dataset, pair in sorted(members.items()):
            if set(pair) != {"input", "gs"}:
                log.info(
                    "%s: %s has no %s file, skipped",
                    zip_path,
                    dataset,
                    "gold" if "input" in pair else "input",
                )
                continue
            rows = _scored_pairs(
                _member_text(zf, zip_path, pair["input"]), _member_text(zf, zip_path, pair["gs"])
            )
            written.append(
                _write_sts(Path(out_root) / "sts" / "en" / f"STS{year}" / f"{dataset}.tsv", rows)
            )
    if not written:
        raise InputError(f"{zip_path}: no STS.input/STS.gs file pairs found")
    return written


def import_stsb(tar_path: str | os.PathLike, out_root: str | os.PathLike) -> list[Path]:
    """STS Benchmark ``Stsbenchmark.tar.gz`` -> ``sts/stsb/{split}.tsv`` + ``{split}.meta.tsv``.

    Upstream rows are ``genre file year id score sent1 sent2 [sources...]``; the meta file keeps
    the first four columns line-aligned with the scored pairs.
    """
    tar_path = Path(tar_path)
    out_dir = Path(out_root) / "sts" / "stsb"
    written = []
    with _reading(tar_path), tarfile.open(tar_path) as tf:
        found = {}
        for member in tf:
            m = re.fullmatch(r"sts-(train|dev|test)\.csv", member.name.rsplit("/", 1)[-1])
            if m and member.isfile():
                found[m.group(1)] = list(_lines(tf.extractfile(member))), member.name
        missing = {"train", "dev", "test"} - set(found)
        if missing:
            raise InputError(f"{tar_path}: no sts-{'/'.join(sorted(missing))}.csv inside")
        for split in ("train", "dev", "test"):
            raws, member = found[split]
            rows, meta = [], []
            for i, raw in enumerate(raws, 1):
                where = f"{tar_path}!{member}:{i}"
                cols = _decode(raw, where).split("\t")
                if len(cols) < 7:
                    raise InputError(
                        f"{where}: expected at least 7 tab-separated columns, found {len(cols)}"
                    )
                rows.append((_score(cols[4], where), cols[5], cols[6]))
                meta.append("\t".join(cols[:4]))
            written.append(_write_sts(out_dir / f"{split}.tsv", rows))
            with atomic_open(out_dir / f"{split}.meta.tsv", "wt") as dst:
                dst.writelines(line + "\n" for line in meta)
            written.append(out_dir / f"{split}.meta.tsv")
    return written


def import_semeval2017(
    eval_zip: str | os.PathLike, gs_zip: str | os.PathLike, out_root: str | os.PathLike
) -> list[Path]:
    """SemEval-2017 Task 1 eval + gold zips -> ``sts/sts17/{pair}.tsv`` (track -> pair names).

    Column order stays as in the input files (in ar-en, 4b and tr-en the English side is first).
    """
    eval_zip, gs_zip = Path(eval_zip), Path(gs_zip)
    written = []
    with (
        _reading(eval_zip),
        _reading(gs_zip),
        zipfile.ZipFile(eval_zip) as ze,
        zipfile.ZipFile(gs_zip) as zg,
    ):
        for track, pair in STS17_TRACKS.items():
            suffix = re.escape(track) + r"\.[a-z]{2}-[a-z]{2}\.txt"
            member_in = _zip_member(ze, eval_zip, r"STS\.input\." + suffix)
            member_gs = _zip_member(zg, gs_zip, r"STS\.gs\." + suffix)
            rows = _scored_pairs(
                _member_text(ze, eval_zip, member_in),
                _member_text(zg, gs_zip, member_gs),
                allow_longer_input=track in _STS17_INPUT_LONGER,
            )
            written.append(_write_sts(Path(out_root) / "sts" / "sts17" / f"{pair}.tsv", rows))
    return written


def import_tatoeba(files: Iterable[str | os.PathLike], out_root: str | os.PathLike) -> list[Path]:
    """LASER ``tatoeba.{xxx}-eng.{xxx,eng}`` files -> ``tatoeba/``, checking each pair is aligned."""
    sides: dict[str, dict[str, Path]] = {}
    for f in map(Path, files):
        m = re.fullmatch(r"tatoeba\.([a-z]+)-eng\.([a-z]+)", f.name)
        if not m or m.group(2) not in (m.group(1), "eng"):
            raise InputError(f"{f}: not a LASER Tatoeba file name (tatoeba.xxx-eng.{{xxx,eng}})")
        sides.setdefault(m.group(1), {})[m.group(2)] = f
    written = []
    for xxx, pair in sorted(sides.items()):
        if set(pair) != {xxx, "eng"}:
            raise InputError(
                f"tatoeba.{xxx}-eng: got only {sorted(pair.values())}; both sides are needed"
            )
        lines = {lang: path.read_bytes().splitlines() for lang, path in pair.items()}
        if len(lines[xxx]) != len(lines["eng"]):
            raise InputError(
                f"{pair[xxx]} has {len(lines[xxx])} lines but {pair['eng']} has {len(lines['eng'])}"
            )
        for lang in (xxx, "eng"):
            path = pair[lang]
            for i, raw in enumerate(lines[lang], 1):
                _decode(raw, f"{path}:{i}")
            out = Path(out_root) / "tatoeba" / path.name
            with atomic_open(out, "wb") as dst:
                dst.writelines(raw + b"\n" for raw in lines[lang])
            written.append(out)
    return written


def import_bucc2018(
    archives: Iterable[str | os.PathLike], out_root: str | os.PathLike, lang: str
) -> list[Path]:
    """BUCC 2018 ``bucc2018-{xx}-en.{split}-gold.tar.bz2`` archives -> ``bucc2018/{xx}-en/``.

    Each archive holds ``bucc2018/{xx}-en/{xx}-en.{split}.{xx,en}`` (UTF-8, ``id<TAB>sentence``)
    and ``{xx}-en.{split}.gold`` (``xx_id<TAB>en_id``), the layout LASER's tasks/bucc and
    XTREME's download_data.sh extract. The files keep their names under
    ``bucc2018/{xx}-en/``, with each side's sentences also alone in ``.txt.gz``
    (:func:`_write_bucc_split`); every line is checked (two columns, UTF-8, ids unique per file, each
    gold id present on its side), so a bad archive fails here naming the member and line.
    """
    pair = f"{lang}-en"
    pattern = re.compile(rf"{re.escape(pair)}\.(\w+)\.({re.escape(lang)}|en|gold)")
    written = []
    for archive in map(Path, archives):
        found: dict[str, dict[str, tuple[str, list[bytes]]]] = {}
        with _reading(archive), tarfile.open(archive) as tf:
            for member in tf:
                m = pattern.fullmatch(member.name.rsplit("/", 1)[-1])
                if m and member.isfile():
                    raws = list(_lines(tf.extractfile(member)))
                    found.setdefault(m.group(1), {})[m.group(2)] = (member.name, raws)
        if not found:
            raise InputError(f"{archive}: no {pair}.{{split}}.{{{lang},en,gold}} member inside")
        for split, files in sorted(found.items()):
            missing = {lang, "en", "gold"} - set(files)
            if missing:
                raise InputError(
                    f"{archive}: {pair}.{split} lacks its {', '.join(sorted(missing))}"
                )
            ids = {side: _bucc_ids(archive, *files[side]) for side in (lang, "en")}
            _check_bucc_gold(archive, *files["gold"], src_ids=ids[lang], tgt_ids=ids["en"])
            written += _write_bucc_split(Path(out_root) / "bucc2018" / pair, split, files)
    return written


def _write_bucc_split(folder: Path, split: str, files: dict) -> list[Path]:
    """The split's three files under their upstream names, and each side's sentences alone
    (``{pair}.{split}.{side}.txt.gz``, in file order), the text a ``mining`` entry reads."""
    pair = folder.name
    written = []
    for side, (_, raws) in files.items():
        out = folder / f"{pair}.{split}.{side}"
        with atomic_open(out, "wb") as dst:
            dst.writelines(raw + b"\n" for raw in raws)
        written.append(out)
        if side != "gold":
            with atomic_open(out.with_name(out.name + ".txt.gz"), "wb") as dst:
                dst.writelines(raw.split(b"\t", 1)[1] + b"\n" for raw in raws)
            written.append(out.with_name(out.name + ".txt.gz"))
    return written


def _bucc_ids(archive: Path, member: str, raws: list[bytes]) -> set[str]:
    """The ids of a BUCC sentence file, checking every line is UTF-8 ``id<TAB>sentence``."""
    ids = set()
    for i, raw in enumerate(raws, 1):
        where = f"{archive}!{member}:{i}"
        cols = _decode(raw, where).split("\t")
        if len(cols) != 2 or not cols[0]:
            raise InputError(f"{where}: expected id<TAB>sentence, found {len(cols)} column(s)")
        if cols[0] in ids:
            raise InputError(f"{where}: id {cols[0]} occurs twice")
        ids.add(cols[0])
    return ids


def _check_bucc_gold(
    archive: Path, member: str, raws: list[bytes], *, src_ids: set[str], tgt_ids: set[str]
) -> None:
    for i, raw in enumerate(raws, 1):
        where = f"{archive}!{member}:{i}"
        cols = _decode(raw, where).split("\t")
        if len(cols) != 2:
            raise InputError(f"{where}: expected xx_id<TAB>en_id, found {len(cols)} column(s)")
        for col, known in zip(cols, (src_ids, tgt_ids), strict=True):
            if col not in known:
                raise InputError(f"{where}: gold id {col} is in no sentence file of the split")


# The columns of XNLI-1.0/xnli.{dev,test}.tsv the importer reads (its header names them all).
_XNLI_COLUMNS = ("language", "sentence1", "sentence2", "pairID")


def import_xnli(
    zip_path: str | os.PathLike, out_root: str | os.PathLike, corpus_id: str, lang: str
) -> list[Path]:
    """XNLI 1.0 ``XNLI-1.0.zip`` -> ``{corpus_id}.{lang}.gz`` + ``{corpus_id}.en.gz``.

    The zip holds every language in ``XNLI-1.0/xnli.{dev,test}.tsv`` (a header, then one row per
    language and pair, rows of one pair sharing ``pairID``). The ``lang`` rows are joined with the
    English row of the same ``pairID``; premise and hypothesis become separate pairs, and an
    exact repeat of a pair is dropped (each premise comes with three hypotheses), keeping the
    first, dev before test: the mirror's convention, before its decontamination.
    """
    zip_path = Path(zip_path)
    seen: set[tuple[str, str]] = set()
    outs = [Path(out_root) / f"{corpus_id}.{side}.gz" for side in (lang, "en")]
    with (
        _reading(zip_path),
        zipfile.ZipFile(zip_path) as zf,
        atomic_open(outs[0], "wt") as out_xx,
        atomic_open(outs[1], "wt") as out_en,
    ):
        for split in ("dev", "test"):
            member = _zip_member(zf, zip_path, rf"xnli\.{split}\.tsv")
            for pair in _xnli_pairs(zf, f"{zip_path}!{member}", member, lang):
                if pair not in seen:
                    seen.add(pair)
                    out_xx.write(pair[0] + "\n")
                    out_en.write(pair[1] + "\n")
    return outs


def _xnli_pairs(
    zf: zipfile.ZipFile, where: str, member: str, lang: str
) -> Iterator[tuple[str, str]]:
    """(``lang`` text, English text) for the premise, then the hypothesis, of each ``lang`` row
    of one XNLI tsv, in file order; whitespace runs collapsed as in the mirror."""
    rows = _xnli_rows(zf, where, member, (lang, "en"))
    english = {pair_id: texts for pair_id, texts, _ in rows["en"]}
    if not rows[lang]:
        raise InputError(f"{where}: no rows of language {lang!r}")
    for pair_id, texts, lineno in rows[lang]:
        if pair_id not in english:
            raise InputError(f"{where}:{lineno}: pairID {pair_id} has no English row")
        for xx_text, en_text in zip(texts, english[pair_id], strict=True):
            yield _collapse(xx_text), _collapse(en_text)


def _xnli_rows(
    zf: zipfile.ZipFile, where: str, member: str, langs: tuple[str, ...]
) -> dict[str, list[tuple[str, tuple[str, str], int]]]:
    """The rows of ``langs``: (pairID, (sentence1, sentence2), line number), in file order.

    Read as Hugging Face's xnli loader reads the file (``csv`` with ``QUOTE_NONE``, tab
    delimiter): a line is a row, tabs split it, quote characters are text.
    """
    rows: dict[str, list] = {lang: [] for lang in langs}
    with zf.open(member) as stream:
        lines = enumerate(_lines(stream), 1)
        header = _decode(next(lines, (1, b""))[1], f"{where}:1").lstrip("\ufeff").split("\t")
        missing = [c for c in _XNLI_COLUMNS if c not in header]
        if missing:
            raise InputError(f"{where}:1: header lacks column(s) {', '.join(missing)}")
        lang_at, s1_at, s2_at, id_at = (header.index(c) for c in _XNLI_COLUMNS)
        for lineno, raw in lines:
            cols = _decode(raw, f"{where}:{lineno}").split("\t")
            if len(cols) != len(header):
                raise InputError(
                    f"{where}:{lineno}: expected {len(header)} tab-separated columns, "
                    f"found {len(cols)}"
                )
            if cols[lang_at] in rows:
                rows[cols[lang_at]].append((cols[id_at], (cols[s1_at], cols[s2_at]), lineno))
    return rows


def import_source(
    source: Source,
    downloaded: str | os.PathLike | Sequence[str | os.PathLike],
    out_root: str | os.PathLike,
    **options,
) -> list[Path]:
    """Run the importer for ``source.format`` on the downloaded file(s); returns written paths.

    ``options`` override the registry's (``max_pairs=None`` imports a whole OPUS corpus). STS
    years are read from the zip names (``STS2012-en-test.zip``), as :func:`fetch` saves them.
    Afterwards every file in ``source.outputs`` must exist, so an archive that lacks a data set
    the registry promises is an error here rather than a missing input three rules later.
    """
    paths = (
        [Path(downloaded)]
        if isinstance(downloaded, (str, os.PathLike))
        else [Path(p) for p in downloaded]
    )
    source.require_downloadable()
    opts = {**source.options, **options}
    fmt = source.format
    if fmt == "opus-moses-zip":
        written = import_opus_moses_zip(
            paths[0], out_root, corpus_id=source.id, langs=source.languages, **opts
        )
    elif fmt == "paranmt-tsv":
        written = [import_paranmt(paths[0], out_root, name=source.id.rsplit("/", 1)[-1])]
    elif fmt == "senteval-sts-zip":
        written = [out for path in paths for out in import_senteval_sts(path, out_root)]
    elif fmt == "stsb-tar":
        written = import_stsb(paths[0], out_root)
    elif fmt == "semeval2017-zip":
        if len(paths) != 2:
            raise SourceError(
                f"{source.id}: needs the eval zip and the gold zip, got {len(paths)} file(s)"
            )
        written = import_semeval2017(paths[0], paths[1], out_root)
    elif fmt == "laser-tatoeba":
        written = import_tatoeba(paths, out_root)
    elif fmt == "bucc2018-tar-bz2":
        written = import_bucc2018(paths, out_root, **opts)
    elif fmt == "xnli-zip":
        written = import_xnli(paths[0], out_root, source.id, source.languages[0])
    else:
        raise SourceError(f"{source.id}: no importer for format {fmt!r}")
    missing = [o for o in source.outputs if not (Path(out_root) / o).exists()]
    if missing:
        raise InputError(
            f"{paths[0]}: import of {source.id} did not produce {len(missing)} file(s): "
            + ", ".join(missing[:5])
        )
    return written
