"""The registry of data sources: upstream URL, format and mirror-layout outputs of each.

Everything else reads the mirror layout (docs/design.md §3); this module is the one place that knows
where each data set comes from. Checksums are ``None`` where nobody has hashed the upstream
file yet: a user who has can pin them here, and the download then refuses anything else.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from psp.data.sources.pins import BUCC2018_SHA256, TATOEBA_SHA256
from psp.io import InputError

Format = Literal[
    "opus-moses-zip",
    "paranmt-tsv",
    "senteval-sts-zip",
    "stsb-tar",
    "semeval2017-zip",
    "laser-tatoeba",
    "bucc2018-tar-bz2",
    "xnli-zip",
    "github-raw",
]


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
        filenames: the local name of a download, by URL, where the URL's last segment is not
            one (a query string).
        options: importer settings (OPUS language codes, the paper's pair cap).
        license: the license as stated upstream.
        download_folder: the folder under the download directory the files are saved in, where
            several sources are cut from one upstream file (XNLI's one zip for all languages):
            they share it, so the file is downloaded once. Empty: the source's own ``id``.
    """

    id: str
    url: str
    sha256: str | None
    format: Format
    languages: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    extra_urls: tuple[str, ...] = ()
    checksums: dict[str, str] = field(default_factory=dict)
    filenames: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    license: str = ""
    download_folder: str = ""

    @property
    def urls(self) -> tuple[str, ...]:
        return (self.url, *self.extra_urls)

    @property
    def mirror_only(self) -> bool:
        """Whether only a data mirror provides the set (format ``github-raw``): the mirror merged,
        deduplicated and decontaminated it, so no download reproduces it."""
        return self.format == "github-raw"

    def require_downloadable(self) -> None:
        """Raise :class:`SourceError` naming the mirror for a :attr:`mirror_only` set."""
        if self.mirror_only:
            raise SourceError(_mirror_only_message(self))

    def sha256_of(self, url: str) -> str | None:
        """The pinned checksum of one of :attr:`urls`, or None."""
        return self.sha256 if url == self.url else self.checksums.get(url)

    def filename(self, url: str) -> str:
        """The name a download of ``url`` is saved under (and the importers see)."""
        return self.filenames.get(url) or url.split("?", 1)[0].rsplit("/", 1)[-1]


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
# The zips SentEval's get_transfer_data.bash downloads, from the STS wiki's current host
# (ixa2.si.ehu.es moved to ixa2.si.ehu.eus, which serves https).
_STS_WIKI = "https://ixa2.si.ehu.eus/stswiki/images"
_STS_URLS = {
    2012: f"{_STS_WIKI}/4/40/STS2012-en-test.zip",
    2013: f"{_STS_WIKI}/2/2f/STS2013-en-test.zip",
    2014: f"{_STS_WIKI}/8/8c/STS2014-en-test.zip",
    2015: f"{_STS_WIKI}/d/da/STS2015-en-test.zip",
    2016: f"{_STS_WIKI}/9/98/STS2016-en-test.zip",
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
        url=f"{_STS_WIKI}/4/48/Stsbenchmark.tar.gz",
        sha256=None,
        format="stsb-tar",
        languages=("en",),
        outputs=tuple(
            f"sts/stsb/{s}{x}" for s in ("train", "dev", "test") for x in (".tsv", ".meta.tsv")
        ),
        license="scores CC BY-SA 4.0; text per source",
    )
    semeval = "https://alt.qcri.org/semeval2017/task1/data/uploads"
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
        sha256=TATOEBA_SHA256[tatoeba[0].rsplit("/", 1)[-1]],
        format="laser-tatoeba",
        languages=(*TATOEBA_LANGUAGES, "eng"),
        outputs=tuple("tatoeba/" + url.rsplit("/", 1)[-1] for url in tatoeba),
        extra_urls=tuple(tatoeba[1:]),
        checksums={url: TATOEBA_SHA256[url.rsplit("/", 1)[-1]] for url in tatoeba[1:]},
        license="Tatoeba terms of use (CC BY 2.0 FR)",
    )
    yield Source(
        id="paraphrase/paranmt/para-nmt-50m",
        url=_PARANMT_URL,
        sha256=None,
        format="paranmt-tsv",
        languages=("en",),
        outputs=("paraphrase/paranmt/para-nmt-50m.tsv.gz",),
        filenames={_PARANMT_URL: "para-nmt-50m.zip"},
        license="research use (Wieting and Gimpel, 2018)",
    )
    yield from _bucc_sources()
    yield from _xnli_sources()


# The paper's http://phontron.com/data/para-nmt-50m.zip answers 404. The authors' later repository
# (jwieting/paraphrastic-representations-at-scale, preprocess/paranmt/do_all.sh) downloads the same
# para-nmt-50m.zip from Google Drive; drive.usercontent.google.com serves it without the
# virus-scan page when asked with confirm=t.
_PARANMT_URL = (
    "https://drive.usercontent.google.com/download"
    "?id=1rbF3daJjCsa1-fu2GANeJd2FBXos1ugD&export=download&confirm=t"
)

BUCC_LANGUAGES = ("de", "fr", "ru", "zh")
BUCC_SPLITS = ("sample", "training")  # the test split's gold was never published


def _bucc_sources() -> Iterator[Source]:
    """BUCC 2018 shared task: each pair's sample and training archives with their gold."""
    for xx in BUCC_LANGUAGES:
        names = [f"bucc2018-{xx}-en.{split}-gold.tar.bz2" for split in BUCC_SPLITS]
        urls = [f"https://comparable.limsi.fr/bucc2018/{name}" for name in names]
        yield Source(
            id=f"bucc2018/{xx}-en",
            url=urls[0],
            sha256=BUCC2018_SHA256[names[0]],
            format="bucc2018-tar-bz2",
            languages=(xx, "en"),
            outputs=tuple(
                f"bucc2018/{xx}-en/{xx}-en.{split}.{name}"
                for split in BUCC_SPLITS
                for name in (xx, f"{xx}.txt.gz", "en", "en.txt.gz", "gold")
            ),
            extra_urls=(urls[1],),
            checksums={urls[1]: BUCC2018_SHA256[names[1]]},
            options={"lang": xx},
            license="BUCC 2018 shared task data (research use; see comparable.limsi.fr/bucc2018)",
        )


XNLI_URL = "https://dl.fbaipublicfiles.com/XNLI/XNLI-1.0.zip"


def _xnli_sources() -> Iterator[Source]:
    """XNLI 1.0 dev + test as bitext, one source per pair, all cut from the one upstream zip.

    The shared mirror's copy is this minus 13-14 pairs per language that also occur in
    evaluation sets (its SOURCES.md), so a download has those few pairs more.
    """
    for xx in PAPER_LANGUAGES:
        sid = f"bitext/{xx}-en/xnli"
        yield Source(
            id=sid,
            url=XNLI_URL,
            sha256=None,
            format="xnli-zip",
            languages=(xx, "en"),
            outputs=(f"{sid}.{xx}.gz", f"{sid}.en.gz"),
            license="CC BY-NC 4.0",
            download_folder="bitext/xnli",
        )


def _github(repo: str, commit: str, path: str) -> str:
    """A raw URL for a file, a tree URL for a folder (folders have no raw form)."""
    if path.endswith("/"):
        return f"https://github.com/{repo}/tree/{commit}/{path}"
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


# Licences as the mirror's SOURCES.md states them (the model cards list them per corpus).
_WMT_TERMS = "WMT test sets: freely available for research (no explicit licence)"
_MIRROR_LICENSES = {
    "wmt-newstest": _WMT_TERMS,
    "ntrex128": "CC BY-SA 4.0",
    "tico19-test": "CC0",
    "un-v1.0-dev-test": "UN corpus terms (free use with acknowledgement)",
    "multi30k": "Flickr30k terms (research use)",
    "parasci": "none stated (research dataset; cite Dong et al. 2021)",
    "mono/en": _WMT_TERMS,
    "quijote": "public domain (Project Gutenberg)",
}


def _mirror_source(
    sid: str, *, url: str, languages: tuple[str, ...], output: str, license: str
) -> Source:
    """A set only a data mirror provides: ``url`` names where it came from, no download."""
    return Source(
        id=sid,
        url=url,
        sha256=None,
        format="github-raw",
        languages=languages,
        outputs=(output,),
        license=license,
    )


#: Mirror-only bitext: name -> (repository, commit, folder with {xx}, languages paired with en).
_MIRROR_BITEXT = {
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

#: Mirror-only monolingual text: id -> (repository, commit, file, language).
_MIRROR_MONO = {
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


def _mirror_bitext() -> Iterator[Source]:
    for name, (repo, commit, path, languages) in _MIRROR_BITEXT.items():
        for xx in languages:
            sid = f"bitext/{xx}-en/{name}"
            yield Source(
                id=sid,
                url=_github(repo, commit, path.format(xx=xx)),
                sha256=None,
                format="github-raw",
                languages=(xx, "en"),
                outputs=(f"{sid}.{xx}.gz", f"{sid}.en.gz"),
                license=_MIRROR_LICENSES[name],
            )


def _mirror_paraphrase() -> Iterator[Source]:
    brmson = ("brmson/dataset-sts", "e1d3375f5b3bc24f21aa4e46f96eb379e9fc1081")
    for split, upstream in (("train", "train"), ("dev", "val"), ("test", "test")):
        yield _mirror_source(
            f"paraphrase/mrpc/{split}",
            url=_github(*brmson, f"data/para/msr/msr-para-{upstream}.tsv"),
            languages=("en",),
            output=f"paraphrase/mrpc/{split}.tsv",
            license="MSR license",
        )
    parasci = ("dqxiu/ParaSCI", "6394ac9c327d1e76b9a51c31cd73c1591b85ea04")
    for split in ("acl-train", "acl-val", "acl-test", "arxiv-val", "arxiv-test"):
        folder = "ParaSCI-ACL" if split.startswith("acl") else "ParaSCI-arXiv"
        yield _mirror_source(
            f"paraphrase/parasci/{split}",
            url=_github(*parasci, f"Data/{folder}/"),
            languages=("en",),
            output=f"paraphrase/parasci/{split}.tsv.gz",
            license=_MIRROR_LICENSES["parasci"],
        )
    for split in ("train", "val", "test_2016"):
        yield _mirror_source(
            f"paraphrase/flickr30k-captions/{split}",
            url=_github(*_MULTI30K, "data/task2/raw/"),
            languages=("en",),
            output=f"paraphrase/flickr30k-captions/{split}.tsv.gz",
            license="Flickr30k terms (research use)",
        )


def _mirror_mono() -> Iterator[Source]:
    for sid, (repo, commit, path, lang) in _MIRROR_MONO.items():
        yield _mirror_source(
            sid,
            url=_github(repo, commit, path),
            languages=(lang,),
            output=f"{sid}.txt.gz",
            license=_MIRROR_LICENSES["quijote" if "quijote" in sid else "mono/en"],
        )


def _mirror_sources() -> Iterator[Source]:
    """Sets a data mirror provides and no download reproduces (merged, deduplicated, cleaned)."""
    yield from _mirror_bitext()
    yield from _mirror_paraphrase()
    yield from _mirror_mono()


SOURCES: dict[str, Source] = {
    s.id: s for s in (*_bitext_sources(), *_eval_sources(), *_mirror_sources())
}


def with_pins(source: Source, pins: dict[str, str]) -> Source:
    """``source`` with the sha256 ``pins`` (by upstream URL) added to or replacing its own.

    For a user who hashed a file the registry leaves unpinned, or whose HTTP mirror serves a
    re-packed one (the workflow's ``source_sha256``); URLs of other sources are ignored.
    """
    extra = {url: pins[url] for url in source.extra_urls if url in pins}
    return replace(
        source, sha256=pins.get(source.url, source.sha256), checksums={**source.checksums, **extra}
    )


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


def _mirror_only_message(source: Source) -> str:
    return (
        f"{source.id} is a set the data mirror derived from {source.url} (merged, deduplicated and "
        "decontaminated, see the mirror's SOURCES.md); set `mirror:` to a copy of that mirror"
    )
