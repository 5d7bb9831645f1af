"""``results/report.md``: the paper's tables for every model beside its untrained floor and the
peers, with the training curves, mining results and the BUCC-style mining evaluation; plus
``readme_results.md`` (the README's results section) and ``results.csv`` (every score, tidy).

The report only reads what earlier rules wrote; it computes no metric itself. Every paper table
is a pandas pivot of one tidy frame (:func:`collect_results`), so the report, the README section
and ``results.csv`` cannot disagree. Paths inside the report are relative to its folder so the
Markdown renders wherever ``results/`` is copied.

Tables 3 and 4 score each SemEval-2017 track and Tatoeba language with the trained model of its
languages (``ar-ar`` by ``ar-en``, ``en-en`` by ``en``): the one with the fewest languages that
covers the task, as in the paper, where each language pair has its own model.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from psp.compare_losses import Training, comparison_section
from psp.evaluate.sts17 import STS17_COLUMNS
from psp.evaluate.tables import (
    MISSING,
    STS_AVG,
    STS_YEAR,
    TATOEBA_METRICS,
    TIDY_COLUMNS,
    fmt,
    language_label,
    markdown,
    pivot,
    select,
    tidy_eval_dir,
    with_text,
)
from psp.evaluate.tatoeba import tatoeba_code
from psp.filters.pipeline import REASONS
from psp.io import InputError, atomic_open

TOP_PAIRS = 10
SPEED_COLUMNS = (
    "encoder",
    "kind",
    "threads",
    "sentences_per_s",
    "load_s",
    "peak_rss_mib",
    "sts_avg",
)
FLOOR_NOTE = (
    "A cell `x (y)` gives the trained model's figure x and, in brackets, that of its untrained "
    "floor y: random piece embeddings over the same SentencePiece model, the floor any training "
    "must clear. `–` marks a task the run has no result for."
)


@dataclass
class Table:
    """One rendered table: a heading, the frame (text cells), its label columns and notes."""

    title: str
    frame: pd.DataFrame
    labels: int = 1
    notes: Sequence[str] = ()

    def render(self, level: int) -> list[str]:
        lines = [f"{'#' * level} {self.title}", "", markdown(self.frame, self.labels)]
        return lines + [*(f"{note}\n" for note in self.notes)]


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"report input not found: {path}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: {err}") from None


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def _cell(text: str) -> str:
    """Free text in a table cell: a ``|`` would end the cell."""
    return text.replace("|", "\\|")


# ---- the tidy results ---------------------------------------------------------------------


def collect_results(
    evals: Sequence[Path], floors: Sequence[Path] = (), peers: Sequence[Path] = ()
) -> pd.DataFrame:
    """Every score of the run (columns :data:`~psp.evaluate.tables.TIDY_COLUMNS`).

    Each path is an evaluation's ``metrics.json``; its folder is named after the model (or the
    peer), and ``kind`` is ``trained``, ``floor`` (the same model name: the untrained model of
    that name) or ``peer``.
    """
    parts = [
        tidy_eval_dir(Path(path).parent, Path(path).parent.name, kind)
        for kind, paths in (("trained", evals), ("floor", floors), ("peer", peers))
        for path in paths
    ]
    return pd.concat([pd.DataFrame(columns=list(TIDY_COLUMNS)), *parts], ignore_index=True)


def beside_floor(scores: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """The trained rows of ``scores`` with ``text`` = ``"79.9 (75.0)"``: the figure and, in
    brackets, the same cell of the model's floor (``–`` where the run has no floor for it)."""
    trained = select(scores, kind="trained")
    floor = select(scores, kind="floor")[[*keys, "value"]].rename(columns={"value": "floor"})
    merged = trained.merge(floor, on=list(keys), how="left")
    floor_text = merged["floor"].map(fmt).where(merged["floor"].notna(), MISSING)
    return merged.assign(text=merged["value"].map(fmt) + " (" + floor_text + ")")


def scoring_models(
    scores: pd.DataFrame, tasks: Mapping[str, set[str]], languages: Mapping[str, Sequence[str]]
) -> dict[str, str | None]:
    """The trained model that scores each task (``None`` where none covers it): among those
    with a result for it, the one with the fewest languages that include the task's."""
    trained = select(scores, kind="trained")
    chosen: dict[str, str | None] = {}
    for task, needed in tasks.items():
        candidates = [
            model
            for model in pd.unique(trained.loc[trained["task"] == task, "model"])
            if needed <= set(_languages(languages, model))
        ]
        chosen[task] = min(candidates, key=lambda m: len(set(languages[m])), default=None)
    return chosen


def _languages(languages: Mapping[str, Sequence[str]], model: str) -> Sequence[str]:
    if model not in languages:
        raise ValueError(f"no languages given for model {model!r} (known: {', '.join(languages)})")
    return languages[model]


def _peer_rows(scores: pd.DataFrame) -> pd.DataFrame:
    """The peers' rows of ``scores`` with their cell text and row label."""
    peers = with_text(select(scores, kind="peer"))
    return peers.assign(row="peer " + peers["model"])


# ---- Table 1: training data ---------------------------------------------------------------


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
    """Table 1: per model the corpora, pairs read, kept and removed per filter (the filters
    that removed nothing anywhere are left out); then the SentencePiece vocabulary and its
    unknown characters per held-out language."""
    corpora = corpora or {}
    rows = []
    for path in data_stats:
        stats, model = _json(Path(path)), Path(path).parent.name
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
    tables = []
    if rows:
        frame = pd.DataFrame(rows)
        dropped = [r for r in REASONS if not frame[r].any()]
        frame = frame.drop(columns=dropped)
        counts = [c for c in frame.columns if c in ("pairs in", "kept", *REASONS)]
        frame[counts] = frame[counts].map("{:,}".format)
        frame = frame.rename(columns={r: f"− {r}" for r in REASONS})
        notes = ["Pairs removed per filter, each counted under the first filter that removes it."]
        if dropped:
            notes.append(f"No pair was removed by: {', '.join(dropped)}.")
        tables.append(Table("Table 1: training data", frame, labels=2, notes=notes))
    spm_rows = []
    for path in spm_stats:
        stats = _json(Path(path))
        for language, held in stats["heldout"].items():
            top = ", ".join(f"{char!r} {count:,}" for char, count in held["top_unknown"][:5])
            spm_rows.append(
                {
                    "model": stats["model"],
                    "language": language,
                    "vocabulary": f"{stats['vocab_size']:,}",
                    "held-out lines": f"{held['lines']:,}",
                    "unknown chars %": f"{100 * held['unknown_char_share']:.3f}",
                    "lines with unknown %": f"{100 * held['line_share']:.2f}",
                    "unknown digits": "".join(held["unknown_digits"]) or "none",
                    "most frequent unknown": _cell(top) or "none",
                }
            )
    if spm_rows:
        tables.append(
            Table(
                "Table 1b: SentencePiece vocabulary, unknown characters on held-out text",
                pd.DataFrame(spm_rows),
                labels=2,
            )
        )
    return tables


# ---- Table 2: English STS -----------------------------------------------------------------


def sts_tables(scores: pd.DataFrame) -> list[Table]:
    """Table 2: STS 2012-16 (mean Pearson over each year's datasets), their average and STS-B
    test, one row per model with its floor in the row below, then the peers; the per-dataset
    figures, STS-B r and rho and the Sentence-BERT convention follow as detail tables."""
    sts = scores[
        scores["benchmark"].str.match(STS_YEAR) | scores["benchmark"].isin(["STSB", STS_AVG])
    ]
    if sts.empty:
        return []
    row_label = sts["kind"].map(
        {"trained": "{}", "floor": "untrained {} (floor)", "peer": "peer {}"}
    )
    sts = with_text(sts).assign(
        row=[lab.format(m) for lab, m in zip(row_label, sts["model"], strict=True)]
    )
    # Each floor right below its model: order rows by model, trained before floor, peers last.
    models = list(pd.unique(select(sts, kind="trained")["model"]))
    rank = {("trained", m): 2 * i for i, m in enumerate(models)} | {
        ("floor", m): 2 * i + 1 for i, m in enumerate(models)
    }
    sts = sts.assign(
        order=[rank.get((k, m), len(rank)) for k, m in zip(sts["kind"], sts["model"], strict=True)]
    ).sort_values("order", kind="stable")

    main = pd.concat(
        [
            select(sts, task="mean", metric="pearson"),
            select(sts, benchmark="STSB", task="test", metric="pearson").assign(
                benchmark="STS-B test"
            ),
        ]
    )
    main = pivot(main, "row", "benchmark").rename(columns={"row": "model", STS_AVG: "Avg"})
    tables = [
        Table(
            "Table 2: English STS (Pearson r x 100; STS12-16: mean over each year's datasets)",
            main,
            notes=[
                "The untrained rows use random piece embeddings over the model's SentencePiece "
                "vocabulary: the floor a trained model must clear."
            ],
        )
    ]
    paired = pd.concat(
        [beside_floor(sts, ["model", "benchmark", "task", "metric"]), select(sts, kind="peer")]
    )
    datasets = select(paired, metric="pearson")
    datasets = datasets[
        datasets["benchmark"].str.match(STS_YEAR) & ~datasets["task"].isin(["mean", "all"])
    ]
    if not datasets.empty:
        table = pivot(datasets, ["benchmark", "task"], "row")
        tables.append(
            Table(
                "Table 2, per dataset (Pearson r x 100)",
                table.rename(columns={"benchmark": "year", "task": "dataset"}),
                labels=2,
            )
        )
    stsb = select(paired, benchmark="STSB")
    if not stsb.empty:
        metric = stsb["metric"].map({"pearson": " r", "spearman": " rho"})
        table = pivot(stsb.assign(split=stsb["task"] + metric), "row", "split")
        tables.append(
            Table("Table 2, STS Benchmark (x 100)", table.rename(columns={"row": "model"}))
        )
    alls = select(paired, task="all", metric="spearman")
    if not alls.empty:
        table = pivot(alls, "row", "benchmark").rename(columns={"row": "model", STS_AVG: "Avg"})
        tables.append(
            Table(
                "Table 2, Sentence-BERT convention (Spearman rho x 100 over each year's "
                "concatenated datasets)",
                table,
            )
        )
    return tables


# ---- Table 3: SemEval-2017 ----------------------------------------------------------------


def sts17_tables(scores: pd.DataFrame, languages: Mapping[str, Sequence[str]]) -> list[Table]:
    """Table 3: one column per track (the paper's order), scored by the model of its languages
    with its floor beside; the peers below. Then en-en by every trained model (the X-en models
    keep their English), Pearson and Spearman."""
    sts17 = select(scores, benchmark="STS17")
    sts17 = sts17[sts17["task"] != "avg"]
    if sts17.empty:
        return []
    tracks = [t for t in STS17_COLUMNS if t in set(sts17["task"])]
    tracks += [t for t in pd.unique(sts17["task"]) if t not in tracks]
    chosen = scoring_models(
        sts17, {t: set(STS17_COLUMNS.get(t, t.split("-")[:2])) for t in tracks}, languages
    )
    pearson = select(sts17, metric="pearson")
    paired = beside_floor(pearson, ["model", "task"])
    paired = paired[[chosen[t] == m for t, m in zip(paired["task"], paired["model"], strict=True)]]
    scored_by = pd.DataFrame(
        {"row": "scored by", "task": tracks, "text": [chosen[t] or MISSING for t in tracks]}
    )
    main = pd.concat([scored_by, paired.assign(row="P-SP (floor)"), _peer_rows(pearson)])
    table = pivot(main, "row", "task").rename(columns={"row": ""})[["", *tracks]]
    notes = [
        f"Track {t}: no trained model covers its languages." for t in tracks if chosen[t] is None
    ]
    out = [Table("Table 3: SemEval-2017 STS (Pearson r x 100)", table, notes=notes)]
    en = select(sts17, task="en-en")
    if select(en, kind="trained")["model"].nunique() > 1:
        detail = beside_floor(en, ["model", "metric"])
        detail = detail.assign(
            metric=detail["metric"].map({"pearson": "Pearson r", "spearman": "Spearman rho"})
        )
        out.append(
            Table(
                "Table 3, en-en by every model (x 100)",
                pivot(detail, "model", "metric"),
            )
        )
    return out


# ---- Table 4: Tatoeba ---------------------------------------------------------------------


def tatoeba_tables(scores: pd.DataFrame, languages: Mapping[str, Sequence[str]]) -> list[Table]:
    """Table 4: one row per language, the mean error of both directions by the model of its
    language with its floor, then the peers' as columns; the per-direction figures below."""
    tatoeba = select(scores, benchmark="Tatoeba")
    tatoeba = tatoeba[tatoeba["task"] != "avg"]
    if tatoeba.empty:
        return []
    codes = list(pd.unique(tatoeba["task"]))
    chosen = scoring_models(
        tatoeba, {code: {tatoeba_code(code)[0], "en"} for code in codes}, languages
    )
    paired = beside_floor(tatoeba, ["model", "task", "metric"])
    paired = paired[[chosen[c] == m for c, m in zip(paired["task"], paired["model"], strict=True)]]
    labels = pd.DataFrame(
        {
            "task": codes,
            "language": [language_label(c) for c in codes],
            "model": [chosen[c] or MISSING for c in codes],
        }
    )
    mean = select(paired, metric="mean_error").assign(column="P-SP (floor)")
    peers = _peer_rows(select(tatoeba, metric="mean_error")).assign(column=lambda f: f["row"])
    main = pivot(pd.concat([mean, peers]), "task", "column")
    main = labels.merge(main, on="task", how="left").drop(columns="task").fillna(MISSING)
    notes = [
        f"{language_label(c)}: no trained model covers its language."
        for c in codes
        if chosen[c] is None
    ]
    out = [
        Table(
            "Table 4: Tatoeba retrieval error rate (%, mean of both directions)",
            main,
            labels=2,
            notes=notes,
        )
    ]
    if not paired.empty:
        detail = paired.assign(column=paired["metric"].map(TATOEBA_METRICS))
        detail = labels.merge(pivot(detail, "task", "column"), on="task").drop(columns="task")
        out.append(
            Table("Table 4, per direction (error rate %, floor in brackets)", detail, labels=2)
        )
    return out


# ---- mining quality, speed ----------------------------------------------------------------


def bucc_table(bucc: Sequence[Path]) -> list[Table]:
    """Mining quality: per pair the dev-tuned threshold and precision, recall, F1 on test."""
    rows = []
    for path in bucc:
        results = _json(Path(path))
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
                    "test sentences (src / tgt)": f"{test['n_src']:,} / {test['n_tgt']:,}",
                }
            )
        except KeyError as err:
            raise InputError(f"{path}: no {err} entry") from None
    if not rows:
        return []
    note = (
        "Gold translation pairs hidden among unrelated sentences on both sides; the threshold "
        "maximises F1 on the dev task and is applied unchanged to the test task (P, R, F1 x 100)."
    )
    return [Table("Mining quality (BUCC-style)", pd.DataFrame(rows), notes=[note])]


def speed_table(speed: Path | None) -> list[Table]:
    """Table 5: encoding speed and memory of every encoder, with its STS average beside."""
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
            "load s": frame["load_s"].map("{:.2f}".format),
            "peak RSS MiB": frame["peak_rss_mib"].map("{:,.0f}".format),
            "STS avg": frame["sts_avg"].map(fmt),
        }
    )
    return [Table("Table 5: encoding speed", table, labels=2)]


# ---- training and mining sections (report only) -------------------------------------------


def _train_section(train_logs: Sequence[Path], base: Path) -> list[str]:
    lines = ["## Training", ""]
    for log_path in train_logs:
        model = log_path.parent.name
        log = pd.read_csv(log_path, sep="\t")
        steps = log[(log["event"] == "step") & log["pairs_per_s"].notna()]
        lines += [f"### {model}", ""]
        if not steps.empty:
            epochs = int((log["event"] == "epoch").sum())
            lines += [
                f"{epochs} epochs, {steps['step'].iloc[-1]} steps, median "
                f"{steps['pairs_per_s'].median():,.0f} pairs/s, final loss "
                f"{float(steps['loss'].iloc[-1]):.4f}.",
                "",
            ]
        curve = _rel(log_path.parent / "learning_curve.png", base)
        lines += [f"![learning curve of {model}]({curve})", ""]
    return lines


def _top_pairs(path: Path, n: int) -> pd.DataFrame:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [line.rstrip("\n").split("\t") for _, line in zip(range(n), handle, strict=False)]
    frame = pd.DataFrame(rows, columns=["score", "source", "target"])
    return frame.assign(
        source=frame["source"].str[:160].map(_cell), target=frame["target"].str[:160].map(_cell)
    )


def _mine_section(mined: Sequence[Path], base: Path) -> list[str]:
    lines = ["## Mining", ""]
    for stats_path in mined:
        stats = _json(stats_path)
        pair = stats_path.name.removesuffix(".stats.json")
        histogram = _rel(stats_path.with_name(pair + ".histogram.png"), base)
        lines += [
            f"### {pair} ({stats_path.parent.name} model)",
            "",
            f"{stats['n_src']:,} source and {stats['n_tgt']:,} target sentences, k={stats['k']}, "
            f"{stats['margin']} margin, {stats['retrieval']} retrieval: {stats['kept']:,} pairs "
            f"at score ≥ {stats['threshold']:g} (of {stats['candidates']:,} candidates).",
            "",
            f"![score histogram of {pair}]({histogram})",
            "",
            f"Top {TOP_PAIRS} pairs:",
            "",
            markdown(_top_pairs(stats_path.with_name(pair + ".tsv.gz"), TOP_PAIRS), labels=3),
        ]
    return lines


# ---- the report ---------------------------------------------------------------------------


@dataclass
class ReportInputs:
    """What the report reads, as the workflow names it (see ``get_report_inputs``).

    ``evals``, ``floors`` and ``peers`` are evaluations' ``metrics.json`` files, their CSVs
    beside; ``languages`` and ``corpora`` map each trained model to its configured languages
    and corpora; ``speed`` and ``speed_plot`` are Table 5's inputs where the run benchmarks;
    ``loss_comparison`` the trainings of the objectives compared (:mod:`psp.compare_losses`).
    """

    evals: Sequence[Path]
    languages: Mapping[str, Sequence[str]]
    floors: Sequence[Path] = ()
    peers: Sequence[Path] = ()
    train_logs: Sequence[Path] = ()
    mined: Sequence[Path] = ()
    bucc: Sequence[Path] = ()
    data_stats: Sequence[Path] = ()
    spm_stats: Sequence[Path] = ()
    corpora: Mapping[str, Sequence[str]] | None = None
    speed: Path | None = None
    speed_plot: Path | None = None
    loss_comparison: Sequence[Training] = ()

    def __post_init__(self) -> None:
        for name in ("evals", "floors", "peers", "train_logs", "mined", "bucc", "data_stats"):
            setattr(self, name, [Path(p) for p in getattr(self, name)])
        self.spm_stats = [Path(p) for p in self.spm_stats]
        self.speed = Path(self.speed) if self.speed else None
        self.speed_plot = Path(self.speed_plot) if self.speed_plot else None


def paper_tables(inputs: ReportInputs, scores: pd.DataFrame) -> list[list[Table]]:
    """The paper's tables of the run, one list (main table, then details) per paper table."""
    groups = [
        data_tables(inputs.data_stats, inputs.spm_stats, inputs.corpora),
        sts_tables(scores),
        sts17_tables(scores, inputs.languages),
        tatoeba_tables(scores, inputs.languages),
        bucc_table(inputs.bucc),
        speed_table(inputs.speed),
    ]
    return [group for group in groups if group]


def _missing_note(inputs: ReportInputs, scores: pd.DataFrame) -> list[str]:
    """Trained models the run evaluated without a floor: their cells show ``(–)``."""
    floors = set(select(scores, kind="floor")["model"])
    lacking = [p.parent.name for p in inputs.evals if p.parent.name not in floors]
    if not lacking:
        return []
    return [f"No untrained floor in this run for: {', '.join(lacking)}.", ""]


def write_report(
    out_path: str | os.PathLike,
    inputs: ReportInputs,
    readme_path: str | os.PathLike | None = None,
    results_path: str | os.PathLike | None = None,
) -> Path:
    """Write the report and, where asked, the README's results section and the tidy scores.

    Args:
        out_path: ``results/report.md``.
        inputs: the run's outputs the report gathers.
        readme_path: ``readme_results.md``: the paper's tables without pictures or mining
            samples, headed ``## Results``, to paste into README.md.
        results_path: ``results.csv``: every score of every embedder, one row per model x
            benchmark x task x metric (columns model, kind, benchmark, task, metric, value).
    """
    out_path = Path(out_path)
    base = out_path.parent
    scores = collect_results(inputs.evals, inputs.floors, inputs.peers)
    groups = paper_tables(inputs, scores)
    note = _missing_note(inputs, scores)

    lines = ["# psp-mine report", "", "## Evaluation", "", FLOOR_NOTE, "", *note]
    for group in groups:
        lines += group[0].render(2)
        for detail in group[1:]:
            lines += detail.render(3)
        if group[0].title.startswith("Table 5") and inputs.speed_plot:
            lines += [f"![speed against quality]({_rel(inputs.speed_plot, base)})", ""]
        if group[0].title.startswith("Mining quality"):
            lines += [
                f"![precision-recall of {p.parent.name}]({_rel(p.with_name('pr_curve.png'), base)})\n"
                for p in inputs.bucc
            ]
    lines += comparison_section(inputs.loss_comparison)
    if inputs.train_logs:
        lines += _train_section(inputs.train_logs, base)
    if inputs.mined:
        lines += _mine_section(inputs.mined, base)
    with atomic_open(out_path, "wt") as handle:
        handle.write("\n".join(lines).rstrip() + "\n")

    if readme_path is not None:
        readme = ["## Results", "", "Generated from the run's `results/` by the `report` rule."]
        readme += ["", FLOOR_NOTE, "", *note]
        for group in groups:
            for table in group:
                readme += table.render(3)
        with atomic_open(readme_path, "wt") as handle:
            handle.write("\n".join(readme).rstrip() + "\n")
    if results_path is not None:
        with atomic_open(results_path, "wt") as handle:
            scores.to_csv(handle, index=False, float_format="%.4f", lineterminator="\n")
    return out_path
