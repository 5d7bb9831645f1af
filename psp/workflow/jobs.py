"""Config → job parameters: what each job of the Snakemake workflow reads and the settings it
takes, kept here so it is tested like the rest.

The workflow's `rules/common.smk` calls these functions; nothing in this module imports
Snakemake. What the Snakefile refuses of a config before it plans any job is
:mod:`psp.workflow.checks`. References to data ("refs") are mirror-layout ids such as ``bitext/es-en/wmt-newstest``
(a corpus), ``bitext/es-en/wmt-newstest.es`` (one side of it, as monolingual text) or
``mono/en/wmt-newstest-en``; anything else is a local file path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from psp.data.corpora import corpus_files
from psp.data.sources import SOURCES
from psp.evaluate.sts import STS17_COLUMNS
from psp.mine.config import AUTO_THRESHOLD

# Evaluation data every eval job reads (STS 2012-16, STS Benchmark, SemEval-2017, Tatoeba).
EVAL_SOURCE_IDS = ("sts/en", "sts/stsb", "sts/sts17", "tatoeba")
MIRROR_TOPS = ("bitext", "bucc2018", "mono", "paraphrase", "sts", "tatoeba")
# A BUCC 2018 split (bucc2018/de-en/de-en.sample): its two sentence files and its gold.
BUCC2018_SPLIT = re.compile(r"bucc2018/[a-z]{2}-en/[a-z]{2}-en\.(sample|training)")


class ConfigError(ValueError):
    """A configuration that validates against the schema but does not make sense."""


def knn_job_threads(shards: int) -> int:
    """Threads of one ``knn_shard_pair`` job in a grid of ``shards`` × ``shards`` jobs.

    Much of a kNN job runs on one thread (reading its blocks, sorting the probe entries, the final
    top-k), so where jobs can run side by side, one thread each does the most work per core: two
    such jobs took 0.8 × the time of two two-thread jobs one after the other (docs/mining.md,
    Sizing). A lone job has nothing beside it and takes two.
    """
    return 1 if shards > 1 else 2


def data_root(mirror: str | None) -> Path:
    """Where imported data lives: the mirror itself, or the workflow's own download area."""
    return Path(mirror) if mirror else Path("results/sources")


def staged_root(files: Sequence[str | os.PathLike], relative: Sequence[str | os.PathLike]) -> Path:
    """The data root a job's input ``files`` lie under, given the same files relative to it.

    Rule scripts find the root this way instead of taking the configured mirror: under a
    storage plugin a job reads local copies of its inputs, which lie elsewhere.

    Raises:
        ValueError: a file does not end in its relative path, or the files lie under two roots.
    """
    roots = set()
    for file, rel in zip(files, relative, strict=True):
        parts, tail = Path(file).parts, Path(rel).parts
        if parts[-len(tail) :] != tail:
            raise ValueError(f"input {file} is not {rel} in a data root")
        roots.add(Path(*parts[: -len(tail)]))
    if len(roots) != 1:
        raise ValueError(f"inputs lie under {len(roots)} data roots: {sorted(map(str, roots))}")
    return roots.pop()


def is_mirror_ref(ref: str) -> bool:
    return ref.split("/", 1)[0] in MIRROR_TOPS and not Path(ref).exists()


def source_of(ref: str) -> str:
    """The source id that provides a ref: ``bitext/es-en/wmt-newstest.es`` → ``bitext/es-en/wmt-newstest``."""
    for candidate in (ref, re.sub(r"\.[a-z]{2,3}$", "", ref)):
        if candidate in SOURCES:
            return candidate
        for source_id in SOURCES:
            if candidate.startswith(source_id + "/"):
                return source_id
    raise ConfigError(f"no known source provides {ref!r}; known: {', '.join(sorted(SOURCES))}")


def text_file(root: Path, ref: str) -> Path:
    """The file of a monolingual text ref in the mirror layout."""
    corpus, dot, lang = ref.rpartition(".")
    if dot and re.fullmatch(r"[a-z]{2,3}", lang) and corpus.startswith("bitext/"):
        return root / f"{corpus}.{lang}.gz"
    return root / f"{ref}.txt.gz"


def relative_text_file(ref: str) -> str:
    """A text ref's file relative to the data root (``mono/en/x`` → ``mono/en/x.txt.gz``)."""
    return str(text_file(Path(), ref))


def mirror_files(root: Path, ref: str, languages: list[str] | None = None) -> list[Path]:
    """Files a ref reads in a mirror: corpus files, one text file, an evaluation folder's files,
    or a BUCC 2018 split's sentence and gold files."""
    if ref in EVAL_SOURCE_IDS:
        return [root / out for out in SOURCES[ref].outputs]
    if BUCC2018_SPLIT.fullmatch(ref) and languages is not None:
        return [root / f"{ref}.{lang}" for lang in (*languages, "gold")]
    is_one_side = ref.startswith("bitext/") and re.search(r"\.[a-z]{2,3}$", ref)
    if ref.startswith(("bitext/", "paraphrase/")) and languages is not None and not is_one_side:
        return [Path(path) for path in corpus_files(root, ref, tuple(languages))]
    return [text_file(root, ref)]


def refs_files(root: Path, refs: Sequence[str], languages: list[str] | None = None) -> list[Path]:
    """:func:`mirror_files` of several refs, in order."""
    return [path for ref in refs for path in mirror_files(root, ref, languages)]


def filter_config(entry: dict) -> dict:
    """The filter settings of a model; keys it leaves out take its type's preset (psp.data.filters)."""
    return dict(entry.get("filters", {}))


def heldout_corpora(model: str, config: Mapping) -> list[str]:
    """Corpus ids of text a model's SentencePiece model was not trained on, for its statistics.

    The model's ``spm.heldout`` if set, else the dev and test gold corpora of every ``bucc:``
    entry of the model (config.yaml holds those out of training), each once.
    """
    entry = config["models"][model]
    listed = entry.get("spm", {}).get("heldout")
    if listed is not None:
        return list(dict.fromkeys(listed))
    gold = [
        corpus
        for task in config.get("bucc", {}).values()
        if task["model"] == model
        for corpus in (task["dev"], task["test"])
        if not corpus.startswith("bucc2018/")  # BUCC 2018 is no corpus, and never trained on
    ]
    return list(dict.fromkeys(gold))


def eval_sets(evaluation: dict, languages: list[str] | None) -> dict:
    """What an embedder is evaluated on: every configured set its languages cover.

    ``languages=None`` (a peer) means every configured set.
    """
    covered = None if languages is None else set(languages) | {"en"}

    def covers(langs) -> bool:
        return covered is None or set(langs) <= covered

    return {
        "sts": bool(evaluation["sts"]) and covers(["en"]),
        "sts17": [t for t in evaluation["sts17"] if covers(STS17_COLUMNS[t])],
        "tatoeba": [lang for lang in evaluation["tatoeba"] if covers([lang]) and lang != "en"],
    }


def bucc_refs(entry: dict) -> list[str]:
    """Every ref a ``bucc`` entry's task reads: dev and test gold corpora, the distractors, and
    the aligned other side of a distractor that is one side of a bitext corpus (the task leaves
    out a line that translates a gold sentence: ``psp.mine.bucc``)."""
    distractors = [*entry.get("distractors", {}).get("src", [])]
    distractors += entry.get("distractors", {}).get("tgt", [])
    return [
        entry["dev"],
        entry["test"],
        *distractors,
        *filter(None, map(aligned_side, distractors)),
    ]


def aligned_side(ref: str) -> str | None:
    """The other side of a one-side bitext ref (``bitext/ru-en/x.ru`` → ``bitext/ru-en/x.en``),
    else ``None``."""
    match = re.fullmatch(r"bitext/([a-z]{2,3})-([a-z]{2,3})/(.+)\.([a-z]{2,3})", ref)
    if match is None or match[4] not in match.group(1, 2):
        return None
    other = match[2] if match[4] == match[1] else match[1]
    return f"bitext/{match[1]}-{match[2]}/{match[3]}.{other}"


def bucc_data(entry: dict, pair: str) -> dict:
    """The ``psp.mine.bucc.BuccData`` fields of a ``bucc`` entry (files relative to the data root)."""
    src, tgt = pair.split("-")
    distractors = entry.get("distractors", {})
    return {
        "dev_gold": entry["dev"],
        "test_gold": entry["test"],
        "src_lang": src,
        "tgt_lang": tgt,
        "src_distractors": tuple(relative_text_file(r) for r in distractors.get("src", [])),
        "tgt_distractors": tuple(relative_text_file(r) for r in distractors.get("tgt", [])),
        "n_distractors": entry["max_distractors"],
    }


def threshold_bucc(config: dict, pair: str) -> str | None:
    """The ``bucc`` entry whose dev optimum mining ``pair`` uses, or None.

    A pair mines at that optimum when its threshold is ``auto`` (the default) and the ``bucc``
    section evaluates the same pair with the same model; otherwise at its own number, or at the
    margin's fixed default (``psp.mine.bucc.mining_threshold``).
    """
    entry, bucc = config["mining"][pair], config.get("bucc", {}).get(pair)
    if entry.get("threshold", AUTO_THRESHOLD) != AUTO_THRESHOLD or bucc is None:
        return None
    return pair if bucc["model"] == entry["model"] else None
