"""Where every data set comes from, how to fetch it, and how to turn it into the mirror layout.

The rest of the pipeline only reads the mirror layout (DESIGN §3), so this module is the one
place that knows upstream URLs and archive formats. Three parts:

- ``SOURCES``: the registry, keyed by the source's path in the mirror layout.
- :func:`download`: streaming HTTP download that resumes a ``.part`` file with a ``Range``
  request, retries transient failures, checks sha256 and renames atomically.
- importers, one per upstream format, each writing mirror-layout files atomically;
  :func:`import_source` picks the right one for a :class:`Source`.

Checksums are ``None`` where nobody has hashed the upstream file yet: a user who has can pin
them in the registry, and :func:`download` then refuses anything else.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.client
import json
import logging
import os
import random
import re
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import IO, Any, Literal

from tqdm import tqdm

from psp.io import InputError, atomic_open

log = logging.getLogger(__name__)

Format = Literal[
    "opus-moses-zip",
    "paranmt-tsv",
    "senteval-sts-zip",
    "stsb-tar",
    "semeval2017-zip",
    "laser-tatoeba",
    "github-raw",
]


class DownloadError(RuntimeError):
    """A download failed for good: the message names the URL and the reason."""


class SourceError(ValueError):
    """A source id is unknown, or the source cannot be obtained the way that was asked."""


@dataclass(frozen=True)
class Source:
    """One upstream data set and the mirror-layout files it becomes.

    Attributes:
        id: the source's path in the mirror layout, without language suffix
            (``bitext/es-en/OpenSubtitles2018``, ``sts/sts17``).
        url: the upstream file to download (for ``github-raw``, where the files live).
        sha256: checksum of the file at ``url``; ``None`` where upstream is not pinned.
        format: which importer turns the download into the layout.
        languages: the languages of the data (for bitext, ``(xx, "en")``).
        outputs: the files the importer writes, relative to the data root.
        extra_urls: further files the importer needs (the SemEval-2017 gold zip, the other
            STS years, every Tatoeba file after the first).
        checksums: sha256 of files in ``extra_urls``, by URL, where pinned.
        options: importer settings (OPUS language codes, the paper's pair cap).
        license: the license as stated upstream.
    """

    id: str
    url: str
    sha256: str | None
    format: Format
    languages: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    extra_urls: tuple[str, ...] = ()
    checksums: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    license: str = ""

    @property
    def urls(self) -> tuple[str, ...]:
        return (self.url, *self.extra_urls)


# --------------------------------------------------------------------------------------------
# Registry

PAPER_LANGUAGES = ("ar", "de", "es", "fr", "ru", "tr", "zh")

OPUS_BASE = "https://object.pouta.csc.fi"

# layout name -> (OPUS corpus, version, languages, pair cap used by the paper config)
_OPUS_CORPORA: dict[str, tuple[str, str, tuple[str, ...], int | None]] = {
    "OpenSubtitles2018": ("OpenSubtitles", "v2018", PAPER_LANGUAGES, 4_000_000),
    "Tanzil": ("Tanzil", "v1", PAPER_LANGUAGES, None),
    "Europarl": ("Europarl", "v8", ("de", "es", "fr"), None),
    "GlobalVoices": ("GlobalVoices", "v2018q4", PAPER_LANGUAGES, None),
    "MultiUN": ("MultiUN", "v1", ("ar", "ru", "zh"), 4_000_000),
}
# OPUS spells Chinese differently per corpus; everything else uses the ISO 639-1 code.
_OPUS_CODES = {("OpenSubtitles", "zh"): "zh_cn", ("GlobalVoices", "zh"): "zhs"}

STS_DATASETS = {
    2012: ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    2013: ("FNWN", "headlines", "OnWN"),
    2014: ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    2015: ("answers-forums", "answers-students", "belief", "headlines", "images"),
    2016: ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
_STS_URLS = {  # the zips SentEval's get_transfer_data.bash downloads
    2012: "http://ixa2.si.ehu.es/stswiki/images/4/40/STS2012-en-test.zip",
    2013: "http://ixa2.si.ehu.es/stswiki/images/2/2f/STS2013-en-test.zip",
    2014: "http://ixa2.si.ehu.es/stswiki/images/8/8c/STS2014-en-test.zip",
    2015: "http://ixa2.si.ehu.es/stswiki/images/d/da/STS2015-en-test.zip",
    2016: "http://ixa2.si.ehu.es/stswiki/images/9/98/STS2016-en-test.zip",
}

# SemEval-2017 Task 1 track -> pair name in the layout
STS17_TRACKS = {
    "track1": "ar-ar",
    "track2": "ar-en",
    "track3": "es-es",
    "track4a": "es-en",
    "track4b": "es-en-WMT",
    "track5": "en-en",
    "track6": "tr-en",
}
# Tracks whose input file carries unscored pairs after the scored ones: the tr-en input has
# 500 lines but its gold 250, and the first 250 are the scored pairs.
_STS17_INPUT_LONGER = {"track6"}

TATOEBA_LANGUAGES = tuple(
    """afr amh ang ara arq arz ast awa aze bel ben ber bos bre bul cat cbk ceb ces cha cmn cor
    csb cym dan deu dsb dtp ell epo est eus fao fin fra fry gla gle glg gsw heb hin hrv hsb hun
    hye ido ile ina ind isl ita jav jpn kab kat kaz khm kor kur kzj lat lfn lit lvs mal mar max
    mhr mkd mon nds nld nno nob nov oci orv pam pes pms pol por ron rus slk slv spa sqi srp swe
    swg swh tam tat tel tgl tha tuk tur tzl uig ukr urd uzb vie war wuu xho yid yue zsm""".split()
)
_LASER_RAW = (
    "https://raw.githubusercontent.com/facebookresearch/LASER/"
    "74bc6ae7ffb7cba670fe0f428d0ede9f666fb821/data/tatoeba/v1"
)

# Sets the shared mirror extracted from GitHub snapshots (see its SOURCES.md): merged across
# years and directions, deduplicated and decontaminated against the evaluation sets, so only a
# mirror reproduces them; their registry entries point at the pinned upstream files.
_OPUS_MT = ("Helsinki-NLP/OPUS-MT-testsets", "ac0f19c0be3cb4e0d9450fcb2d7a9847c4bdd180")
_MULTI30K = ("multi30k/dataset", "a3d2e0d26b56f3846f66a952536ffed4e401d05a")


def _bitext_sources() -> Iterator[Source]:
    for name, (corpus, version, languages, cap) in _OPUS_CORPORA.items():
        for xx in languages:
            code = _OPUS_CODES.get((corpus, xx), xx)
            pair = "-".join(sorted((code, "en")))
            sid = f"bitext/{xx}-en/{name}"
            yield Source(
                id=sid,
                url=f"{OPUS_BASE}/OPUS-{corpus}/{version}/moses/{pair}.txt.zip",
                sha256=None,
                format="opus-moses-zip",
                languages=(xx, "en"),
                outputs=(f"{sid}.{xx}.gz", f"{sid}.en.gz"),
                options={"codes": {xx: code, "en": "en"}, "max_pairs": cap},
                license=f"OPUS {corpus} {version} (see the corpus page on opus.nlpl.eu)",
            )


def _eval_sources() -> Iterator[Source]:
    sts_urls = [_STS_URLS[year] for year in STS_DATASETS]
    yield Source(
        id="sts/en",
        url=sts_urls[0],
        sha256=None,
        format="senteval-sts-zip",
        languages=("en",),
        outputs=tuple(
            f"sts/en/STS{year}/{d}.tsv" for year, datasets in STS_DATASETS.items() for d in datasets
        ),
        extra_urls=tuple(sts_urls[1:]),
        license="per-dataset terms in each zip's readme",
    )
    yield Source(
        id="sts/stsb",
        url="http://ixa2.si.ehu.es/stswiki/images/4/48/Stsbenchmark.tar.gz",
        sha256=None,
        format="stsb-tar",
        languages=("en",),
        outputs=tuple(
            f"sts/stsb/{s}{x}" for s in ("train", "dev", "test") for x in (".tsv", ".meta.tsv")
        ),
        license="scores CC BY-SA 4.0; text per source",
    )
    semeval = "http://alt.qcri.org/semeval2017/task1/data/uploads"
    yield Source(
        id="sts/sts17",
        url=f"{semeval}/sts2017.eval.v1.1.zip",
        sha256=None,
        format="semeval2017-zip",
        languages=("ar", "en", "es", "tr"),
        outputs=tuple(f"sts/sts17/{pair}.tsv" for pair in STS17_TRACKS.values()),
        extra_urls=(f"{semeval}/sts2017.gs.zip",),
        license="CC BY-SA 4.0",
    )
    tatoeba = [
        f"{_LASER_RAW}/tatoeba.{x}-eng.{side}" for x in TATOEBA_LANGUAGES for side in (x, "eng")
    ]
    yield Source(
        id="tatoeba",
        url=tatoeba[0],
        sha256=None,
        format="laser-tatoeba",
        languages=(*TATOEBA_LANGUAGES, "eng"),
        outputs=tuple("tatoeba/" + url.rsplit("/", 1)[-1] for url in tatoeba),
        extra_urls=tuple(tatoeba[1:]),
        license="Tatoeba terms of use (CC BY 2.0 FR)",
    )
    yield Source(
        id="paraphrase/paranmt/para-nmt-50m",
        url="http://phontron.com/data/para-nmt-50m.zip",
        sha256=None,
        format="paranmt-tsv",
        languages=("en",),
        outputs=("paraphrase/paranmt/para-nmt-50m.tsv.gz",),
        license="research use (Wieting and Gimpel, 2018)",
    )


def _github(repo: str, commit: str, path: str) -> str:
    """A raw URL for a file, a tree URL for a folder (folders have no raw form)."""
    if path.endswith("/"):
        return f"https://github.com/{repo}/tree/{commit}/{path}"
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def _mirror_sources() -> Iterator[Source]:
    bitext = {
        "wmt-newstest": (*_OPUS_MT, "testsets/{xx}-en/", ("es", "fr", "de", "ru", "tr", "zh")),
        "ntrex128": (
            *_OPUS_MT,
            "datasets/microsoft/ntrex/NTREX/NTREX-128/",
            ("es", "fr", "de", "ru", "tr", "ar", "zh"),
        ),
        "tico19-test": (
            *_OPUS_MT,
            "datasets/tico19/testsets/en-{xx}/",
            ("es", "fr", "ru", "ar", "zh"),
        ),
        "un-v1.0-dev-test": (
            "WillSkywalker/verbos-direccionales",
            "c5463a6330d7e24a48d37b78fff96ec540c57e25",
            "testsets/",
            ("es", "fr", "ru", "ar", "zh"),
        ),
        "multi30k": (*_MULTI30K, "data/task1/raw/", ("de", "fr")),
    }
    for name, (repo, commit, path, languages) in bitext.items():
        for xx in languages:
            sid = f"bitext/{xx}-en/{name}"
            yield Source(
                id=sid,
                url=_github(repo, commit, path.format(xx=xx)),
                sha256=None,
                format="github-raw",
                languages=(xx, "en"),
                outputs=(f"{sid}.{xx}.gz", f"{sid}.en.gz"),
            )
    brmson = ("brmson/dataset-sts", "e1d3375f5b3bc24f21aa4e46f96eb379e9fc1081")
    for split, upstream in (("train", "train"), ("dev", "val"), ("test", "test")):
        yield Source(
            id=f"paraphrase/mrpc/{split}",
            url=_github(*brmson, f"data/para/msr/msr-para-{upstream}.tsv"),
            sha256=None,
            format="github-raw",
            languages=("en",),
            outputs=(f"paraphrase/mrpc/{split}.tsv",),
            license="MSR license",
        )
    parasci = ("dqxiu/ParaSCI", "6394ac9c327d1e76b9a51c31cd73c1591b85ea04")
    for split in ("acl-train", "acl-val", "acl-test", "arxiv-val", "arxiv-test"):
        folder = "ParaSCI-ACL" if split.startswith("acl") else "ParaSCI-arXiv"
        yield Source(
            id=f"paraphrase/parasci/{split}",
            url=_github(*parasci, f"Data/{folder}/"),
            sha256=None,
            format="github-raw",
            languages=("en",),
            outputs=(f"paraphrase/parasci/{split}.tsv.gz",),
        )
    for split in ("train", "val", "test_2016"):
        yield Source(
            id=f"paraphrase/flickr30k-captions/{split}",
            url=_github(*_MULTI30K, "data/task2/raw/"),
            sha256=None,
            format="github-raw",
            languages=("en",),
            outputs=(f"paraphrase/flickr30k-captions/{split}.tsv.gz",),
            license="Flickr30k terms (research use)",
        )
    mono = {
        "mono/en/wmt-newstest-en": (*_OPUS_MT, "testsets/", "en"),
        "mono/comparable-quijote/quijote.es": (
            "fernandocruzp/LectorQuijote",
            "199d3a208ad453d86ff2583f2364ac4addbbb250",
            "pg2000.txt",
            "es",
        ),
        "mono/comparable-quijote/quijote.en": (
            "Ugtakhbayar2001/Huffman",
            "2d4cf8a476fe5b50e9873dddea7ae0f5f0474d95",
            "pg996.txt",
            "en",
        ),
    }
    for sid, (repo, commit, path, lang) in mono.items():
        yield Source(
            id=sid,
            url=_github(repo, commit, path),
            sha256=None,
            format="github-raw",
            languages=(lang,),
            outputs=(f"{sid}.txt.gz",),
        )


SOURCES: dict[str, Source] = {
    s.id: s for s in (*_bitext_sources(), *_eval_sources(), *_mirror_sources())
}


def select(prefix: str) -> list[Source]:
    """Sources whose id is ``prefix`` or lies under it (``"bitext/es-en"``, ``"sts"``)."""
    prefix = prefix.rstrip("/")
    found = [s for sid, s in SOURCES.items() if sid == prefix or sid.startswith(prefix + "/")]
    if not found:
        groups = sorted({sid.rsplit("/", 1)[0] for sid in SOURCES})
        raise SourceError(f"unknown source {prefix!r}; known groups: {', '.join(groups)}")
    return found


def resolve(
    source_id: str,
    mirror: str | os.PathLike | None = None,
    data_root: str | os.PathLike | None = None,
) -> list[Path]:
    """Local paths of a source (or every source under an id prefix) in the mirror layout.

    With ``mirror``, the files must already be there and a missing one is an error naming it.
    Without, the paths are where :func:`import_source` writes under ``data_root``, so a
    workflow can name them as outputs before they exist.
    """
    if mirror is None and data_root is None:
        raise SourceError(f"{source_id}: give a mirror or a data_root to resolve it against")
    root = Path(mirror if mirror is not None else data_root)
    paths = [root / out for source in select(source_id) for out in source.outputs]
    if mirror is not None:
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise InputError(
                f"mirror {root} lacks {len(missing)} file(s) of {source_id}: "
                + ", ".join(missing[:5])
            )
    return paths


# --------------------------------------------------------------------------------------------
# Download

_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class _Transient(Exception):
    """A failure worth retrying (connection dropped, timeout, 5xx)."""


def sha256_file(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def download(
    url: str,
    dest: str | os.PathLike,
    sha256: str | None = None,
    retries: int = 3,
    timeout: float = 60,
    chunk_size: int = 1 << 20,
    progress: bool = True,
    backoff: float = 2.0,
) -> Path:
    """Fetch ``url`` to ``dest``; resumable, retried, checksum-verified, atomic.

    Bytes go to ``dest.part`` first. A ``.part`` left by an earlier attempt (or an earlier run)
    is continued with ``Range: bytes=N-``; a server that answers 200 instead of 206 sends the
    whole file, so the part is restarted. Connection errors, truncated bodies and 5xx answers
    are retried ``retries`` times with exponential backoff, keeping the ``.part``. A checksum
    mismatch or a client error (404...) removes the ``.part`` and raises :class:`DownloadError`:
    nothing is left behind, and ``dest`` only ever appears complete and verified.

    Returns ``dest``; an existing ``dest`` with the right checksum is kept as is.
    """
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    if dest.exists():
        if sha256 is None or sha256_file(dest) == sha256:
            return dest
        log.warning("%s: checksum differs from the registry, downloading again", dest)
        dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(retries + 1):
        try:
            _fetch_to_part(url, part, timeout, chunk_size, progress)
            break
        except _Transient as err:
            if attempt == retries:
                raise DownloadError(
                    f"{url}: giving up after {retries + 1} attempts: {err}"
                ) from err
            wait = backoff * 2**attempt
            log.warning("%s: %s; retrying in %.1f s", url, err, wait)
            time.sleep(wait)
    if sha256 is not None:
        actual = sha256_file(part)
        if actual != sha256:
            part.unlink()
            raise DownloadError(f"{url}: sha256 mismatch: expected {sha256}, got {actual}")
    os.replace(part, dest)
    return dest


def _fetch_to_part(url: str, part: Path, timeout: float, chunk_size: int, progress: bool) -> None:
    """One HTTP attempt that appends to (or restarts) ``part``; raises :class:`_Transient`."""
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "psp-mine"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        err.close()
        if err.code == 416 and offset:
            # Nothing left to send: the part is whole if the server's size agrees (a crash
            # between the last byte and the rename), otherwise it is stale and starts over.
            if err.headers.get("Content-Range", "") == f"bytes */{offset}":
                return
            part.unlink()
            raise _Transient(f"HTTP 416 for a resume at byte {offset}; restarting") from err
        if err.code in _RETRY_STATUS:
            raise _Transient(f"HTTP {err.code} {err.reason}") from err
        part.unlink(missing_ok=True)
        raise DownloadError(f"{url}: HTTP {err.code} {err.reason}") from err
    except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as err:
        raise _Transient(str(err)) from err
    with response:
        resumed = offset > 0 and response.status == 206
        if resumed and not response.headers.get("Content-Range", "").startswith(f"bytes {offset}-"):
            # A 206 for some other range than asked: appending would corrupt the file.
            part.unlink()
            raise _Transient(f"unexpected Content-Range {response.headers.get('Content-Range')!r}")
        if not resumed:
            offset = 0
        length = response.headers.get("Content-Length")
        total = offset + int(length) if length is not None else None
        with (
            open(part, "ab" if resumed else "wb") as out,
            tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                desc=part.name[: -len(".part")],
                disable=None if progress else True,
            ) as bar,
        ):
            try:
                while chunk := response.read(chunk_size):
                    out.write(chunk)
                    bar.update(len(chunk))
            except (OSError, http.client.HTTPException) as err:
                raise _Transient(f"connection lost at byte {out.tell()}: {err!r}") from err
            size = out.tell()
    if total is not None and size != total:
        raise _Transient(f"connection closed at byte {size} of {total}")


def fetch(source: Source, download_dir: str | os.PathLike, **kwargs) -> list[Path]:
    """Download every file of ``source`` into ``download_dir/{source.id}/``; returns the paths.

    Each file is checked against its pinned checksum, if any; ``kwargs`` go to :func:`download`.
    """
    if source.format == "github-raw":
        raise SourceError(_mirror_only_message(source))
    folder = Path(download_dir) / source.id
    sums = {**source.checksums, source.url: source.sha256}
    return [
        download(url, folder / url.rsplit("/", 1)[-1], sha256=sums.get(url), **kwargs)
        for url in source.urls
    ]


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
            counts = _copy_aligned(_lines(a), _lines(b), out_a, out_b, take, desc=corpus_id)
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


def _mirror_only_message(source: Source) -> str:
    return (
        f"{source.id} is a set the data mirror derived from {source.url} (merged, deduplicated and "
        "decontaminated, see the mirror's SOURCES.md); set `mirror:` to a copy of that mirror"
    )


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
    opts = {**source.options, **options}
    fmt = source.format
    if fmt == "opus-moses-zip":
        written = import_opus_moses_zip(paths[0], out_root, source.id, source.languages, **opts)
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
    elif fmt == "github-raw":
        raise SourceError(_mirror_only_message(source))
    else:
        raise SourceError(f"{source.id}: no importer for format {fmt!r}")
    missing = [o for o in source.outputs if not (Path(out_root) / o).exists()]
    if missing:
        raise InputError(
            f"{paths[0]}: import of {source.id} did not produce {len(missing)} file(s): "
            + ", ".join(missing[:5])
        )
    return written


def fetch_and_import(
    source: Source,
    download_dir: str | os.PathLike,
    out_root: str | os.PathLike,
    manifest: str | os.PathLike,
    **options,
) -> dict[str, Any]:
    """Download ``source``, import it under ``out_root`` and write ``manifest`` last.

    The manifest (JSON: source id, URLs, the sha256 of every download and the files written) is
    what the workflow waits on, so a source counts as present only once all of it was imported.
    """
    downloaded = fetch(source, download_dir)
    written = import_source(source, downloaded, out_root, **options)
    record = {
        "source": source.id,
        "format": source.format,
        "downloads": [
            {"url": url, "path": str(path), "sha256": sha256_file(path)}
            for url, path in zip(source.urls, downloaded, strict=True)
        ],
        "files": [str(path) for path in written],
    }
    with atomic_open(manifest, "wt") as handle:
        json.dump(record, handle, indent=2)
    return record
