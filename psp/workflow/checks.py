"""What the Snakefile decides about the config before it plans a job: which config files make the
run, and the checks across keys that the schema cannot express.

Each refusal is a :class:`~psp.workflow.jobs.ConfigError` naming the key, raised when the
Snakefile is parsed, so a config that cannot run stops before any job has started.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml

from psp.data.sources import SOURCES
from psp.workflow.jobs import BUCC2018_SPLIT, ConfigError, is_mirror_ref, source_of


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
