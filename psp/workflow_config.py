"""Config → job parameters for the Snakemake workflow, kept here so it is tested like the rest.

The workflow's `rules/common.smk` calls these functions; nothing in this module imports
Snakemake. References to data ("refs") are mirror-layout ids such as ``bitext/es-en/wmt-newstest``
(a corpus), ``bitext/es-en/wmt-newstest.es`` (one side of it, as monolingual text) or
``mono/en/wmt-newstest-en``; anything else is a local file path.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml

from psp.corpora import corpus_files
from psp.evaluate.sts17 import STS17_COLUMNS
from psp.evaluate.tatoeba import tatoeba_code
from psp.sources import SOURCES

# Evaluation data every eval job reads (STS 2012-16, STS Benchmark, SemEval-2017, Tatoeba).
EVAL_SOURCE_IDS = ("sts/en", "sts/stsb", "sts/sts17", "tatoeba")
MIRROR_TOPS = ("bitext", "bucc2018", "mono", "paraphrase", "sts", "tatoeba")
# A BUCC 2018 split (bucc2018/de-en/de-en.sample): its two sentence files and its gold.
BUCC2018_SPLIT = re.compile(r"bucc2018/[a-z]{2}-en/[a-z]{2}-en\.(sample|training)")


class ConfigError(ValueError):
    """A configuration that validates against the schema but does not make sense."""


def replaces_default_config(configfiles: Sequence[str | os.PathLike]) -> bool:
    """Whether the config files given on the command line are a whole run of their own.

    Snakemake merges ``--configfile`` into the Snakefile's default config key by key, so a run of
    its own (configs/paper.yaml) would inherit config.yaml's mining and BUCC pairs, sets that
    exist only in a data mirror. A file that names ``models`` is a whole run and config.yaml is
    not loaded under it; one without (configs/compare_losses.yaml) is an overlay on config.yaml.
    Snakemake has parsed every file before the Snakefile runs, so they load here.
    """
    for path in configfiles:
        with open(path, encoding="utf-8") as handle:
            loaded = yaml.safe_load(handle)
        if isinstance(loaded, dict) and "models" in loaded:
            return True
    return False


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
    """The filter settings of a model; keys it leaves out take its type's preset (psp.filters)."""
    return dict(entry.get("filters", {}))


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


def eval_files(root: Path, sets: dict) -> list[Path]:
    """The files the evaluation sets of :func:`eval_sets` read from a mirror."""
    files = []
    if sets["sts"]:
        files += [root / out for ref in ("sts/en", "sts/stsb") for out in SOURCES[ref].outputs]
    if sets["sts17"]:
        files += [root / "sts" / "sts17" / f"{track}.tsv" for track in sets["sts17"]]
    for lang in sets["tatoeba"]:
        code = tatoeba_code(lang)[1]
        files += [root / "tatoeba" / f"tatoeba.{code}-eng.{side}" for side in (code, "eng")]
    return files


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


def check_references(config: dict) -> None:
    """Cross-key checks the schema cannot express; errors name the offending key."""
    models = config["models"]
    for name, entry in models.items():
        if entry["type"] == "bitext" and name != "-".join(entry["languages"]):
            raise ConfigError(
                f"models.{name}: a bitext model is named after its languages ({'-'.join(entry['languages'])})"
            )
        bitext = [ref for ref in entry["corpora"] if ref.startswith("bitext/")]
        if (
            entry["type"] == "paraphrase"
            and bitext
            and entry.get("filters", {}).get("langid", True)
        ):
            raise ConfigError(
                f"models.{name}.filters.langid: {bitext[0]} gives this paraphrase model pairs with "
                "a non-English side, which the language filter would remove; set langid: false"
            )
    for model in config.get("compare_losses", {}).get("models", []):
        if model not in models:
            raise ConfigError(
                f"compare_losses.models: unknown model {model!r}; known: {', '.join(models)}"
            )
    for pair, entry in config.get("bucc", {}).items():
        _check_bucc_task(pair, entry)
    for section in ("mining", "bucc"):
        for pair, entry in config.get(section, {}).items():
            model = entry["model"]
            if model not in models:
                raise ConfigError(
                    f"{section}.{pair}.model: unknown model {model!r}; known: {', '.join(models)}"
                )
            missing = set(pair.split("-")) - set(models[model]["languages"])
            if missing:
                raise ConfigError(
                    f"{section}.{pair}: model {model!r} covers {models[model]['languages']}, not {sorted(missing)}"
                )


def threshold_bucc(config: dict, pair: str) -> str | None:
    """The ``bucc`` entry whose dev optimum mining ``pair`` uses, or None.

    A pair mines at that optimum when its threshold is ``auto`` (the default) and the ``bucc``
    section evaluates the same pair with the same model; otherwise at its own number, or at the
    margin's fixed default (``psp.mine.bucc.mining_threshold``).
    """
    entry, bucc = config["mining"][pair], config.get("bucc", {}).get(pair)
    if entry.get("threshold", "auto") != "auto" or bucc is None:
        return None
    return pair if bucc["model"] == entry["model"] else None


def _check_bucc_task(pair: str, entry: dict) -> None:
    """A ``bucc`` entry is either BUCC 2018 (dev and test splits of the pair, no distractors,
    sample as dev as in XTREME) or a task built from gold corpora and distractors."""
    refs = {key: entry[key] for key in ("dev", "test")}
    official = {key: BUCC2018_SPLIT.fullmatch(ref) for key, ref in refs.items()}
    distractors = entry.get("distractors", {})
    if any(official.values()):
        expected = {
            key: f"bucc2018/{pair}/{pair}.{split}"
            for key, split in (("dev", "sample"), ("test", "training"))
        }
        if refs != expected:
            raise ConfigError(
                f"bucc.{pair}: BUCC 2018 tunes on the sample split and reports on training; "
                f"set dev: {expected['dev']} and test: {expected['test']}"
            )
        if distractors.get("src") or distractors.get("tgt"):
            raise ConfigError(f"bucc.{pair}.distractors: BUCC 2018 brings its own; remove them")
    elif not (distractors.get("src") and distractors.get("tgt")):
        raise ConfigError(
            f"bucc.{pair}.distractors: a task built from {refs['dev']} needs src and tgt "
            "distractors (or use BUCC 2018: dev bucc2018/{xx}-en/{xx}-en.sample)"
        )


def config_refs(config: dict) -> Iterator[tuple[str, str]]:
    """``(key, ref)`` for every data ref of a config: training corpora, mining text, BUCC sets,
    the news Table 5 times encoders on."""
    for name, entry in config["models"].items():
        for ref in entry["corpora"]:
            yield f"models.{name}.corpora", ref
    for ref in config.get("speed", {}).get("news", []):
        yield "speed.news", ref
    for pair, entry in config.get("mining", {}).items():
        for side in ("src", "tgt"):
            for ref in entry[side]:
                yield f"mining.{pair}.{side}", ref
    for pair, entry in config.get("bucc", {}).items():
        for key in ("dev", "test"):
            yield f"bucc.{pair}.{key}", entry[key]
        for side in ("src", "tgt"):
            for ref in entry.get("distractors", {}).get(side, []):
                yield f"bucc.{pair}.distractors.{side}", ref


#: The folder every rule writes under (outputs, logs, benchmarks), relative to the working dir.
RESULTS = Path("results")


def _same_file_under(path: Path, root: Path) -> Path | None:
    """A file under ``root`` that ``path`` is a hard link of, or None (only hard-linked files,
    ``st_nlink > 1``, are looked for, so the walk is rare)."""
    info = path.stat()
    if info.st_nlink < 2 or not root.is_dir():
        return None
    for folder, _, names in os.walk(root):
        for name in names:
            candidate = Path(folder) / name
            with contextlib.suppress(OSError):
                if os.path.samestat(candidate.stat(), info):
                    return candidate
    return None


def check_inputs_outside_results(config: dict, results: Path = RESULTS) -> None:
    """Refuse a local input file (a path among the config's refs) that is, or links to, a file
    under ``results``: Snakemake deletes a job's outputs before it runs the job, so an input
    that resolves to one would be gone before it is read. Checked when the Snakefile is parsed,
    before any job runs; the error names the key, the file and what it resolves to."""
    root = Path(os.path.realpath(results))
    for key, ref in config_refs(config):
        path = Path(ref)
        if is_mirror_ref(ref) or not path.is_file():
            continue
        resolved = Path(os.path.realpath(path))
        inside = resolved if resolved.is_relative_to(root) else _same_file_under(path, root)
        if inside is not None:
            raise ConfigError(
                f"{key}: {ref} is {inside}, a file under {results}/ that the workflow writes "
                "and deletes before rewriting it; copy the input elsewhere and name the copy"
            )


def check_downloadable(source_id: str, config: dict) -> None:
    """Refuse to plan the download of a set that only a data mirror provides.

    Those sets were merged, deduplicated and decontaminated by the mirror itself, so no download
    reproduces them: their fetch jobs could only fail, after everything before them had run.
    The error names every such set the config reads, and the fix.
    """
    if not SOURCES[source_id].mirror_only:
        return
    needed = [
        f"{key}: {ref}"
        for key, ref in config_refs(config)
        if is_mirror_ref(ref) and SOURCES[source_of(ref)].mirror_only
    ]
    raise ConfigError(
        f"mirror is null, but {source_id} exists only in a data mirror (see its SOURCES.md), "
        f"as do these sets of the config: {'; '.join(needed)}. Run with --config mirror=DIR "
        "(the mirror, e.g. ../shared/data), or leave these sets out of the config"
    )
