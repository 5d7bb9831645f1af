"""The report's tables of the run's other stages: the training data (Table 1), the SentencePiece
vocabulary (Table 1b), mining quality (BUCC-style) and encoding speed (Table 5).

Each reads what its rule wrote (``filter_stats.json``, ``{model}.stats.json``, ``bucc.json``,
``speed.csv``) and returns :class:`~psp.evaluate.markdown.Table` objects for the renderer; none
computes a metric itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from psp.data.filters.pipeline import REASONS
from psp.evaluate.markdown import MISSING, Table, escape, fmt
from psp.io import InputError

SPEED_COLUMNS = (
    "encoder",
    "kind",
    "threads",
    "sentences_per_s",
    "first_pass_per_s",
    "load_s",
    "peak_rss_mib",
    "encoder_mib",
    "sts_avg",
)


def read_json(path: Path) -> dict:
    """A stage's JSON output; a missing or bad file is an error naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"report input not found: {path}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: {err}") from None


def corpora_cell(corpus_ids: Sequence[str]) -> str:
    """Corpus ids grouped by folder, for a table cell: ``bitext/es-en/a``, ``bitext/es-en/b``
    and ``paraphrase/parasci/c`` give ``es-en: a, b; parasci: c``."""
    groups: dict[str, list[str]] = {}
    for corpus in corpus_ids:
        folder, _, name = corpus.rpartition("/")
        groups.setdefault(folder.split("/")[-1], []).append(name)
    return "; ".join(f"{folder}: {', '.join(names)}" for folder, names in groups.items()) or MISSING


def data_tables(
    data_stats: Sequence[Path],
    spm_stats: Sequence[Path] = (),
    corpora: Mapping[str, Sequence[str]] | None = None,
) -> list[Table]:
    """Table 1 (the training data of every model) and Table 1b (its SentencePiece vocabulary),
    each where the run has its inputs."""
    return [*filter_table(data_stats, corpora or {}), *spm_table(spm_stats)]


def filter_table(data_stats: Sequence[Path], corpora: Mapping[str, Sequence[str]]) -> list[Table]:
    """Table 1: per model the corpora, pairs read, kept and removed per filter (the filters
    that removed nothing anywhere are left out)."""
    rows = []
    for path in data_stats:
        stats, model = read_json(Path(path)), Path(path).parent.name
        removed = stats["removed"]
        rows.append(
            {
                "model": model,
                "corpora": corpora_cell(corpora.get(model, [])),
                "pairs in": stats["lines_in"],
                "kept": stats["kept"],
                "kept %": f"{100 * stats['kept'] / max(stats['lines_in'], 1):.1f}",
                **{reason: removed.get(reason, 0) for reason in REASONS},
            }
        )
    if not rows:
        return []
    frame = pd.DataFrame(rows)
    dropped = [r for r in REASONS if not frame[r].any()]
    frame = frame.drop(columns=dropped)
    counts = [c for c in frame.columns if c in ("pairs in", "kept", *REASONS)]
    frame[counts] = frame[counts].map("{:,}".format)
    frame = frame.rename(columns={r: f"− {r}" for r in REASONS})
    notes = ["Pairs removed per filter, each counted under the first filter that removes it."]
    if dropped:
        notes.append(f"No pair was removed by: {', '.join(dropped)}.")
    return [Table("Table 1: training data", frame, labels=2, notes=notes)]


def spm_table(spm_stats: Sequence[Path]) -> list[Table]:
    """Table 1b: per model and held-out language the share of unknown characters and lines
    with one, the unknown digits and the most frequent unknown characters."""
    rows = []
    for path in spm_stats:
        stats = read_json(Path(path))
        for language, held in stats["heldout"].items():
            top = ", ".join(f"{char!r} {count:,}" for char, count in held["top_unknown"][:5])
            rows.append(
                {
                    "model": stats["model"],
                    "language": language,
                    "vocabulary": f"{stats['vocab_size']:,}",
                    "held-out lines": f"{held['lines']:,}",
                    "unknown chars %": f"{100 * held['unknown_char_share']:.3f}",
                    "lines with unknown %": f"{100 * held['line_share']:.2f}",
                    "unknown digits": "".join(held["unknown_digits"]) or "none",
                    "most frequent unknown": escape(top) or "none",
                }
            )
    if not rows:
        return []
    title = "Table 1b: SentencePiece vocabulary, unknown characters on held-out text"
    return [Table(title, pd.DataFrame(rows), labels=2)]


def bucc_table(bucc: Sequence[Path]) -> list[Table]:
    """Mining quality: per pair the dev-tuned threshold and precision, recall, F1 on test of
    the pairs mining writes (after the pair filters), the test F1 at its own optimum and
    without the filters; the precision-recall curve and the dev and test score distributions
    beside each ``bucc.json`` are the table's figures."""
    rows = []
    for path in bucc:
        results = read_json(Path(path))
        try:
            dev, test = results["dev"], results["test"]
            rows.append(
                {
                    "pair": Path(path).parent.name,
                    "threshold (dev)": f"{dev['threshold']:.4f}",
                    "dev F1": fmt(100 * dev["f1"]),
                    "test P": fmt(100 * test["precision"]),
                    "test R": fmt(100 * test["recall"]),
                    "test F1": fmt(100 * test["f1"]),
                    "test F1 at its own optimum": (
                        fmt(100 * test["own_optimum"]["f1"]) if "own_optimum" in test else MISSING
                    ),
                    "test F1 without pair filters": (
                        fmt(100 * test["without_filters"]["f1"])
                        if "without_filters" in test
                        else MISSING
                    ),
                    "test sentences (src / tgt)": f"{test['n_src']:,} / {test['n_tgt']:,}",
                }
            )
        except KeyError as err:
            raise InputError(f"{path}: no {err} entry") from None
    if not rows:
        return []
    note = (
        "Gold translation pairs hidden among unrelated sentences on both sides; the threshold "
        "maximises F1 on the dev task and is applied unchanged to the test task (P, R, F1 x 100), "
        "after the pair filters; without them, at their own dev optimum, beside. The test F1 at "
        "its own optimum is what a threshold tuned on test itself would give: its gap to the "
        "test F1 is what the dev threshold loses in transfer."
    )
    figures = []
    for p in bucc:
        figures.append((f"precision-recall of {p.parent.name}", p.with_name("pr_curve.png")))
        scores = p.with_name("score_distributions.png")
        if scores.exists():
            figures.append((f"margin scores of {p.parent.name}, dev and test", scores))
    return [Table("Mining quality (BUCC-style)", pd.DataFrame(rows), notes=[note], figures=figures)]


def speed_table(speed: Path | None, plot: Path | None = None) -> list[Table]:
    """Table 5: encoding speed and memory of every encoder, with its STS average beside; the
    speed-quality plot is the table's figure. The encoder's MiB are its process's peak less the
    interpreter's start and one output matrix (:mod:`psp.evaluate.worker`)."""
    if speed is None:
        return []
    try:
        frame = pd.read_csv(speed)
    except (FileNotFoundError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise InputError(f"{speed}: {err}") from None
    missing = [c for c in SPEED_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{speed}: missing column(s) {', '.join(missing)}")
    table = pd.DataFrame(
        {
            "encoder": frame["encoder"],
            "kind": frame["kind"],
            "threads": frame["threads"].map(str),
            "sentences/s": frame["sentences_per_s"].map("{:,.0f}".format),
            "first pass sentences/s": frame["first_pass_per_s"].map("{:,.0f}".format),
            "load s": frame["load_s"].map("{:.2f}".format),
            "encoder MiB": frame["encoder_mib"].map("{:,.0f}".format),
            "peak RSS MiB": frame["peak_rss_mib"].map("{:,.0f}".format),
            "STS avg": frame["sts_avg"].map(fmt),
        }
    )
    figures = [("speed against quality", plot)] if plot else []
    return [Table("Table 5: encoding speed", table, labels=2, figures=figures)]
