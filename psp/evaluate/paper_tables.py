"""Tables 2, 3 and 4 of the paper (English STS, SemEval-2017, Tatoeba) from a tidy frame of
scores (:mod:`psp.evaluate.results`): the same functions write an evaluation's ``tables.md``
(:func:`combine_tables`) and the run's report and results page (:mod:`psp.report`).

They lay out what the frame holds:

- a frame with untrained floors (``kind == "floor"``) shows each trained figure with its
  floor's in brackets, ``79.9 (75.0)``; a frame without shows the figure alone;
- given the models' languages (the run's report), Tables 3 and 4 are the paper's: each track or
  language scored by the trained model of its languages (:func:`scoring_models`), as in the
  paper, where each language pair has its own model (``ar-ar`` by ``ar-en``, ``en-en`` by
  ``en``), with the peers beside; without them (one evaluation, or embedders compared with
  ``psp eval``) every embedder has its own row on every task it was evaluated on, average
  included.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from psp.evaluate.markdown import (
    MISSING,
    Table,
    beside_floor,
    cells,
    labelled,
    pivot,
    render,
    select,
)
from psp.evaluate.results import STS_AVG, STS_YEAR, read_metrics, tidy_eval_dir
from psp.evaluate.sts import STS17_COLUMNS
from psp.evaluate.tatoeba import tatoeba_code

FLOOR_LABEL = "floor (untrained, random pieces)"
TATOEBA_METRICS = {"xx2en_error": "xx→en", "en2xx_error": "en→xx", "mean_error": "mean"}
STS17_TITLE = "Table 3: SemEval-2017 STS (Pearson r x 100)"


def language_label(code: str) -> str:
    """``es (spa)`` for a Tatoeba code with a known ISO 639-1 code, else the code."""
    language, _ = tatoeba_code(code)
    return code if language == code else f"{language} ({code})"


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


def _scored_by(frame: pd.DataFrame, chosen: Mapping[str, str | None]) -> pd.DataFrame:
    """The rows of ``frame`` whose model is the one chosen for their task."""
    keep = [chosen.get(t) == m for t, m in zip(frame["task"], frame["model"], strict=True)]
    return frame[keep]


# ---- Table 2: English STS -----------------------------------------------------------------


def sts_tables(scores: pd.DataFrame) -> list[Table]:
    """Table 2: STS 2012-16 (mean Pearson over each year's datasets), their average and STS-B
    test, one row per embedder (each floor in the row below its model, peers last); the
    per-dataset figures, STS-B r and rho and the Sentence-BERT convention follow as details."""
    sts = scores[
        scores["benchmark"].str.match(STS_YEAR) | scores["benchmark"].isin(["STSB", STS_AVG])
    ]
    if sts.empty:
        return []
    # Each floor right below its model: order rows by model, trained before floor, peers last.
    models = list(pd.unique(select(sts, kind="trained")["model"]))
    rank = {("trained", m): 2 * i for i, m in enumerate(models)} | {
        ("floor", m): 2 * i + 1 for i, m in enumerate(models)
    }
    order = [rank.get((k, m), len(rank)) for k, m in zip(sts["kind"], sts["model"], strict=True)]
    sts = sts.assign(order=order).sort_values("order", kind="stable")
    return [
        _sts_main(labelled(sts)),
        *_sts_details(cells(sts, ["model", "benchmark", "task", "metric"])),
    ]


def _sts_main(sts: pd.DataFrame) -> Table:
    main = pd.concat(
        [
            select(sts, task="mean", metric="pearson"),
            select(sts, benchmark="STSB", task="test", metric="pearson").assign(
                benchmark="STS-B test"
            ),
        ]
    )
    main = pivot(main, "row", "benchmark").rename(columns={"row": "model", STS_AVG: "Avg"})
    floors = not select(sts, kind="floor").empty
    note = (
        "The untrained rows use random piece embeddings over the model's SentencePiece "
        "vocabulary: the floor a trained model must clear."
    )
    return Table(
        "Table 2: English STS (Pearson r x 100; STS12-16: mean over each year's datasets)",
        main,
        notes=[note] if floors else [],
    )


def _sts_details(paired: pd.DataFrame) -> list[Table]:
    """Per dataset, STS-B and the Sentence-BERT convention; ``paired``: :func:`cells`."""
    tables = []
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


def sts17_tables(
    scores: pd.DataFrame, languages: Mapping[str, Sequence[str]] | None = None
) -> list[Table]:
    """Table 3, one column per track in the paper's order. With ``languages``, the paper's
    layout (:func:`_sts17_paper`); without, one row per embedder, Pearson then Spearman."""
    sts17 = select(scores, benchmark="STS17")
    if sts17.empty:
        return []
    tracks = [t for t in STS17_COLUMNS if t in set(sts17["task"])]
    tracks += [t for t in pd.unique(sts17["task"]) if t not in tracks]
    if languages is not None:
        return _sts17_paper(sts17, tracks, languages)
    paired = cells(sts17, ["model", "task", "metric"])
    out = []
    for metric, title in (("pearson", STS17_TITLE), ("spearman", "Table 3, Spearman rho (x 100)")):
        found = select(paired, metric=metric)
        if not found.empty:
            table = pivot(found, "row", "task").rename(columns={"row": "model"})
            out.append(Table(title, table[["model", *tracks]]))
    return out


def _sts17_paper(
    sts17: pd.DataFrame, tracks: list[str], languages: Mapping[str, Sequence[str]]
) -> list[Table]:
    """Each track scored by the model of its languages with its floor beside, the peers below;
    then en-en by every trained model (the X-en models keep their English). The average
    column is left out: its figures would mix models."""
    sts17 = sts17[sts17["task"] != "avg"]
    tracks = [t for t in tracks if t != "avg"]
    if sts17.empty:
        return []
    chosen = scoring_models(
        sts17, {t: set(STS17_COLUMNS.get(t, t.split("-")[:2])) for t in tracks}, languages
    )
    pearson = select(sts17, metric="pearson")
    paired = _scored_by(beside_floor(pearson, ["model", "task"]), chosen)
    scored_by = pd.DataFrame(
        {"row": "scored by", "task": tracks, "text": [chosen[t] or MISSING for t in tracks]}
    )
    peers = labelled(select(pearson, kind="peer"))
    main = pd.concat([scored_by, paired.assign(row="P-SP (floor)"), peers])
    table = pivot(main, "row", "task").rename(columns={"row": ""})[["", *tracks]]
    notes = [
        f"Track {t}: no trained model covers its languages." for t in tracks if chosen[t] is None
    ]
    out = [Table(STS17_TITLE, table, notes=notes)]
    en = select(sts17, task="en-en")
    if select(en, kind="trained")["model"].nunique() > 1:
        detail = beside_floor(en, ["model", "metric"])
        detail = detail.assign(
            metric=detail["metric"].map({"pearson": "Pearson r", "spearman": "Spearman rho"})
        )
        out.append(Table("Table 3, en-en by every model (x 100)", pivot(detail, "model", "metric")))
    return out


# ---- Table 4: Tatoeba ---------------------------------------------------------------------


def tatoeba_tables(
    scores: pd.DataFrame, languages: Mapping[str, Sequence[str]] | None = None
) -> list[Table]:
    """Table 4. With ``languages``, the paper's layout (:func:`_tatoeba_paper`); without, one
    row per language and embedder with both directions and their mean."""
    tatoeba = select(scores, benchmark="Tatoeba")
    if tatoeba.empty:
        return []
    if languages is not None:
        return _tatoeba_paper(tatoeba, languages)
    table = _directions(cells(tatoeba, ["model", "task", "metric"]))
    return [Table("Table 4: Tatoeba retrieval error rate (%, both directions)", table, labels=2)]


def _directions(paired: pd.DataFrame) -> pd.DataFrame:
    """One row per language and embedder: xx→en, en→xx and mean error; ``paired``:
    :func:`cells` of Tatoeba scores."""
    paired = paired.assign(
        language=paired["task"].map(language_label),
        column=paired["metric"].map(TATOEBA_METRICS),
    )
    return pivot(paired, ["language", "row"], "column").rename(columns={"row": "model"})


def _tatoeba_paper(tatoeba: pd.DataFrame, languages: Mapping[str, Sequence[str]]) -> list[Table]:
    """One row per language, the mean error of both directions by the model of its language
    with its floor, then the peers' as columns; the per-direction figures below. The
    average row is left out: its figures would mix models."""
    tatoeba = tatoeba[tatoeba["task"] != "avg"]
    if tatoeba.empty:
        return []
    codes = list(pd.unique(tatoeba["task"]))
    chosen = scoring_models(
        tatoeba, {code: {tatoeba_code(code)[0], "en"} for code in codes}, languages
    )
    paired = _scored_by(beside_floor(tatoeba, ["model", "task", "metric"]), chosen)
    labels = pd.DataFrame(
        {
            "task": codes,
            "language": [language_label(c) for c in codes],
            "model": [chosen[c] or MISSING for c in codes],
        }
    )
    mean = select(paired, metric="mean_error").assign(column="P-SP (floor)")
    peers = labelled(select(tatoeba, kind="peer", metric="mean_error"))
    main = pivot(pd.concat([mean, peers.assign(column=peers["row"])]), "task", "column")
    main = labels.merge(main, on="task", how="left").drop(columns="task").fillna(MISSING)
    notes = [
        f"{language_label(c)}: no trained model covers its language."
        for c in codes
        if chosen[c] is None
    ]
    title = "Table 4: Tatoeba retrieval error rate (%, mean of both directions)"
    out = [Table(title, main, labels=2, notes=notes)]
    if not paired.empty:
        detail = _directions(paired.assign(row=paired["model"]))
        out.append(
            Table("Table 4, per direction (error rate %, floor in brackets)", detail, labels=2)
        )
    return out


def score_tables(
    scores: pd.DataFrame, languages: Mapping[str, Sequence[str]] | None = None
) -> list[list[Table]]:
    """Tables 2, 3 and 4 of ``scores`` (one list, main table first, per paper table present)."""
    groups = [
        sts_tables(scores),
        sts17_tables(scores, languages),
        tatoeba_tables(scores, languages),
    ]
    return [group for group in groups if group]


# ---- one evaluation's (or a few side by side) tables.md -----------------------------------


def speed_table(speeds: Mapping[str, dict | None]) -> list[Table]:
    """The embedding speed each evaluation measured on its STS sentences (``metrics.json``)."""
    rows = [
        {
            "model": name,
            "sentences/s": f"{speed['sentences_per_s']:.0f}",
            "threads": str(speed["threads"]),
            "sentences": str(speed["sentences"]),
        }
        for name, speed in speeds.items()
        if speed
    ]
    return [Table("Embedding speed (STS sentences)", pd.DataFrame(rows))] if rows else []


def combine_tables(
    eval_dirs: Mapping[str, str | os.PathLike], floor: str | os.PathLike | None = None
) -> str:
    """Markdown tables with one or more embedders side by side (:func:`score_tables` without
    languages), and the speed each evaluation measured.

    Args:
        eval_dirs: display name -> evaluation directory written by ``evaluate_embedder``.
        floor: evaluation directory of an untrained (random pieces) model; shown last as
            the floor any training must beat.

    Example:
        >>> print(combine_tables({"P-SP en": "results/eval/en", "MiniLM": "results/eval/peers/st-all-MiniLM-L6-v2"}))  # doctest: +SKIP
    """
    dirs = dict(eval_dirs)
    if floor is not None:
        dirs[FLOOR_LABEL] = floor
    scores = pd.concat([tidy_eval_dir(path, name) for name, path in dirs.items()])
    speeds = {
        name: read_metrics(Path(path) / "metrics.json").get("speed") for name, path in dirs.items()
    }
    groups = [*score_tables(scores), speed_table(speeds)]
    lines = render([group for group in groups if group], level=2)
    return "\n".join(lines).rstrip() + "\n"
