"""Archives in the exact layout of each upstream source the paper config downloads.

Each builder names the public source whose layout it follows. The tests serve what they build
from :mod:`tests.fileserver` at each file's upstream host and path (:func:`site_path`, the
layout ``source_url_prefix`` reads) and import it through the real download and import code.
"""

from __future__ import annotations

import io
import random
import tarfile
import zipfile
from collections.abc import Iterable, Sequence

Row = tuple[str, str, str]  # score, sentence 1, sentence 2


def site_path(url: str) -> str:
    """Where an HTTP mirror at a prefix holds ``url``: ``/host/path?query``."""
    return "/" + url.partition("://")[2]


def lines(*rows: str | bytes) -> bytes:
    return b"".join((r if isinstance(r, bytes) else r.encode()) + b"\n" for r in rows)


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def tar_bytes(members: dict[str, bytes], mode: str) -> bytes:
    """A tar archive (``mode`` ``w:gz`` or ``w:bz2``) with a folder entry before each file, as
    ``tar c`` writes them."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tf:
        folders = sorted({name.rsplit("/", 1)[0] for name in members if "/" in name})
        for folder in folders:
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tf.addfile(info)
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def paranmt_zip(rows: Iterable[Row]) -> bytes:
    """``para-nmt-50m.zip``: ``para-nmt-50m/para-nmt-50m.txt``, ``reference<TAB>paraphrase<TAB>
    score``. The paper's URL answers 404; the layout follows the authors' later repository,
    jwieting/paraphrastic-representations-at-scale, preprocess/paranmt/do_all.sh (it unzips the
    archive and moves ``para-nmt-50m/para-nmt-50m.txt`` out) and add_overlap_labels.py (columns
    0-2: reference, paraphrase, similarity)."""
    return zip_bytes(
        {"para-nmt-50m/para-nmt-50m.txt": lines(*(f"{a}\t{b}\t{s}" for s, a, b in rows))}
    )


def opus_moses_zip(corpus: str, codes: Sequence[str], sides: Sequence[Sequence[str]]) -> bytes:
    """OPUS ``{corpus}/{version}/moses/{l1}-{l2}.txt.zip``: ``{corpus}.{l1}-{l2}.{l1}``,
    ``.{l2}`` (line-aligned, UTF-8), ``README`` and ``LICENSE``, language codes sorted, as the
    moses downloads of opus.nlpl.eu (object.pouta.csc.fi) hold them (e.g. OpenSubtitles v2018
    en-es: OpenSubtitles.en-es.en, .es, .ids, README, LICENSE; OpenSubtitles spells Chinese
    zh_cn, GlobalVoices zhs)."""
    order = sorted(range(2), key=lambda i: codes[i])
    pair = "-".join(codes[i] for i in order)
    members = {f"{corpus}.{pair}.{codes[i]}": lines(*sides[i]) for i in order}
    if corpus == "OpenSubtitles":
        members[f"{corpus}.{pair}.ids"] = lines(*("x.xml\ty.xml\t1\t1" for _ in sides[0]))
    members["README"] = f"{corpus} moses export\n".encode()
    members["LICENSE"] = b"see the corpus page\n"
    return zip_bytes(members)


# The folder each STS year's test zip unpacks to (SentEval's data/downstream/get_transfer_data.bash,
# STS_subdirs); 2016 names its files STS2016.input/gs.*.
STS_FOLDERS = {
    2012: "test-gold",
    2013: "test-gs",
    2014: "sts-en-test-gs-2014",
    2015: "test_evaluation_task2a",
    2016: "sts2016-english-with-gs-v1.0",
}


def senteval_sts_zip(year: int, datasets: dict[str, list[Row]]) -> bytes:
    """``STS{year}-en-test.zip``: per dataset ``STS.input.{d}.txt`` (``sent1<TAB>sent2``) and
    ``STS.gs.{d}.txt`` (one score a line) in the year's folder. 2013's SMT gold comes without its
    input (LDC-licensed), and 2012 carries ``STS.gs.ALL.txt``, as in the real zips."""
    folder, prefix = STS_FOLDERS[year], "STS2016" if year == 2016 else "STS"
    members = {f"{folder}/00-readme.txt": b"STS test data\n"}
    for name, rows in datasets.items():
        members[f"{folder}/{prefix}.input.{name}.txt"] = lines(*(f"{a}\t{b}" for _, a, b in rows))
        members[f"{folder}/{prefix}.gs.{name}.txt"] = lines(*(padded(s) for s, _, _ in rows))
    if year == 2013:
        members[f"{folder}/STS.gs.SMT.txt"] = lines("4.000", "2.500")
    if year == 2012:
        members[f"{folder}/STS.gs.ALL.txt"] = lines("1.000")
    return zip_bytes(members)


def padded(score: str) -> str:
    """Scores as upstream writes them ("4.000")."""
    return score if "." in score else f"{score}.000"


def stsb_tar(splits: dict[str, list[tuple[str, ...]]]) -> bytes:
    """``Stsbenchmark.tar.gz``: ``stsbenchmark/sts-{train,dev,test}.csv``, tab-separated
    ``genre file year id score sent1 sent2 [sources]``, plus readme and LICENSE (the STS wiki's
    STSbenchmark page; SentEval cuts columns 1-5, 6 and 7)."""
    members = {"stsbenchmark/readme.txt": b"STS Benchmark\n", "stsbenchmark/LICENSE.txt": b"\n"}
    for split, rows in splits.items():
        members[f"stsbenchmark/sts-{split}.csv"] = lines(*("\t".join(r) for r in rows))
    return tar_bytes(members, "w:gz")


# SemEval-2017 Task 1 track -> the languages in its file names
STS17_FILES = {
    "track1": "ar-ar",
    "track2": "ar-en",
    "track3": "es-es",
    "track4a": "es-en",
    "track4b": "es-en",
    "track5": "en-en",
    "track6": "tr-en",
}


def semeval2017_zips(tracks: dict[str, list[Row]], unscored_tr: int = 250) -> tuple[bytes, bytes]:
    """``sts2017.eval.v1.1.zip`` (``STS2017.eval.v1.1/STS.input.{track}.{l1}-{l2}.txt``) and
    ``sts2017.gs.zip`` (``STS2017.gs/STS.gs.{track}...``), as the SemEval-2017 Task 1 page
    distributes them (and the scripts that unzip them name the members). track6's input holds
    ``unscored_tr`` unscored pairs after the scored ones."""
    inputs, golds = {}, {}
    for track, langs in STS17_FILES.items():
        rows = tracks[track]
        extra = [f"unscored {i}\tpuanlanmamış {i}" for i in range(unscored_tr)]
        body = [f"{a}\t{b}" for _, a, b in rows] + (extra if track == "track6" else [])
        inputs[f"STS2017.eval.v1.1/STS.input.{track}.{langs}.txt"] = lines(*body)
        golds[f"STS2017.gs/STS.gs.{track}.{langs}.txt"] = lines(*(s for s, _, _ in rows))
    return zip_bytes(inputs), zip_bytes(golds)


def bucc2018_tar(
    lang: str,
    split: str,
    sentences: dict[str, list[tuple[str, str]]],
    gold: list[tuple[str, str]],
) -> bytes:
    """``bucc2018-{xx}-en.{split}-gold.tar.bz2``: ``bucc2018/{xx}-en/{xx}-en.{split}.{xx,en}``
    (UTF-8 ``id<TAB>sentence``, ids ``{lang}-000000001``) and ``.gold`` (``xx_id<TAB>en_id``),
    the paths LASER's tasks/bucc/bucc.sh reads after ``tar jxf`` and XTREME's
    scripts/download_data.sh moves."""
    base = f"bucc2018/{lang}-en/{lang}-en.{split}"
    members = {
        f"{base}.{side}": lines(*(f"{i}\t{s}" for i, s in sentences[side])) for side in (lang, "en")
    }
    members[f"{base}.gold"] = lines(*(f"{a}\t{b}" for a, b in gold))
    return tar_bytes(members, "w:bz2")


def bucc_ids(lang: str, texts: Sequence[str], start: int = 1) -> list[tuple[str, str]]:
    return [(f"{lang}-{i:09d}", text) for i, text in enumerate(texts, start)]


def bucc2018_split(
    lang: str,
    split: str,
    gold: Sequence[tuple[str, str]],
    extra: tuple[Sequence[str], Sequence[str]],
    seed: int = 0,
) -> bytes:
    """A BUCC 2018 archive whose gold pairs (``lang`` sentence, English sentence) hide among
    ``extra`` unpaired sentences of each side, every side in its own random order, as in the
    shared task's files."""
    rng = random.Random(seed)
    sides = {}
    for k, side in enumerate((lang, "en")):
        texts = [pair[k] for pair in gold] + list(extra[k])
        order = list(range(len(texts)))
        rng.shuffle(order)
        ids = {i: f"{side}-{n:09d}" for n, i in enumerate(order, 1)}
        sides[side] = (ids, sorted(((ids[i], texts[i]) for i in order), key=lambda r: r[0]))
    pairs = [(sides[lang][0][g], sides["en"][0][g]) for g in range(len(gold))]
    return bucc2018_tar(lang, split, {s: rows for s, (_, rows) in sides.items()}, sorted(pairs))


XNLI_HEADER = (
    "language gold_label sentence1_binary_parse sentence2_binary_parse sentence1_parse "
    "sentence2_parse sentence1 sentence2 promptID pairID genre label1 label2 label3 label4 label5"
).split()

XnliRow = tuple[str, str, str, str]  # language, premise, hypothesis, pairID


def xnli_zip(splits: dict[str, Sequence[XnliRow]]) -> bytes:
    """``XNLI-1.0.zip``: ``XNLI-1.0/xnli.{dev,test}.tsv``, a header naming the 16 columns, then
    one row per language and pair, the languages of a pair sharing ``pairID`` (the order and
    columns Hugging Face's xnli loader reads with ``csv`` ``QUOTE_NONE``; ``sentence1`` the
    premise, ``sentence2`` the hypothesis), plus the readme the zip carries."""
    members = {"XNLI-1.0/README.md": b"XNLI 1.0\n"}
    for split, rows in splits.items():
        body = []
        for lang, premise, hypothesis, pair_id in rows:
            cols = dict.fromkeys(XNLI_HEADER, "")
            cols.update(language=lang, gold_label="neutral", genre="fiction", label1="neutral")
            cols.update(sentence1=premise, sentence2=hypothesis, pairID=pair_id)
            cols["promptID"] = pair_id.rstrip("abc")
            body.append("\t".join(cols[c] for c in XNLI_HEADER))
        members[f"XNLI-1.0/xnli.{split}.tsv"] = lines("\t".join(XNLI_HEADER), *body)
    return zip_bytes(members)
