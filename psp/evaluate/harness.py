"""The full evaluation of one embedder: every configured benchmark, the files it reads, result
files and tables.

Writes into ``out_dir`` (each file atomically): ``sts.csv`` (STS 2012-16 and STS-B rows),
``sts17.csv``, ``tatoeba.csv``, ``metrics.json`` (flat metrics, embedding speed, what was
run) and ``tables.md`` (paper layout, rendered from those files). ``metrics.json`` is written
last but one and ``tables.md`` last, so a workflow can take ``tables.md`` as the sign of a
finished evaluation.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path

from psp.data.sources import SOURCES
from psp.evaluate.base import EmbedderOrMap, Evaluator, embedder_for
from psp.evaluate.paper_tables import combine_tables
from psp.evaluate.results import TABLES, write_rows
from psp.evaluate.sts import STS17_TRACKS, Sts17Evaluator, StsbEvaluator, StsEvaluator
from psp.evaluate.tatoeba import TATOEBA_LANGUAGES, TatoebaEvaluator, tatoeba_code
from psp.evaluate.timing import TimedEmbedder
from psp.io import atomic_open

logger = logging.getLogger(__name__)


def build_evaluators(
    data_root: str | os.PathLike,
    sts: bool = True,
    sts17_tracks: Sequence[str] = STS17_TRACKS,
    tatoeba_langs: Sequence[str] = TATOEBA_LANGUAGES,
) -> list[Evaluator]:
    """The evaluators of a full run, STS first (its embed calls are the speed benchmark)."""
    evaluators: list[Evaluator] = []
    if sts:
        evaluators += [StsEvaluator.from_dir(data_root), StsbEvaluator.from_dir(data_root)]
    if sts17_tracks:
        evaluators.append(Sts17Evaluator.from_dir(data_root, tracks=sts17_tracks))
    if tatoeba_langs:
        evaluators.append(TatoebaEvaluator.from_dir(data_root, languages=tatoeba_langs))
    if not evaluators:
        raise ValueError("nothing to evaluate: STS is off and no STS17 track or Tatoeba language")
    return evaluators


def eval_files(root: Path, sets: dict) -> list[Path]:
    """The files the evaluators of :func:`build_evaluators` read from a mirror, for ``sets``:
    ``{"sts": bool, "sts17": [track, ...], "tatoeba": [language, ...]}`` (what
    :func:`psp.workflow.jobs.eval_sets` gives a model)."""
    files = []
    if sets["sts"]:
        files += [root / out for ref in ("sts/en", "sts/stsb") for out in SOURCES[ref].outputs]
    if sets["sts17"]:
        files += [root / "sts" / "sts17" / f"{track}.tsv" for track in sets["sts17"]]
    for lang in sets["tatoeba"]:
        code = tatoeba_code(lang)[1]
        files += [root / "tatoeba" / f"tatoeba.{code}-eng.{side}" for side in (code, "eng")]
    return files


def evaluate_embedder(
    embedder: EmbedderOrMap,
    data_root: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    sts: bool = True,
    sts17_tracks: Sequence[str] = STS17_TRACKS,
    tatoeba_langs: Sequence[str] = TATOEBA_LANGUAGES,
    name: str | None = None,
) -> dict:
    """Evaluate ``embedder`` (or a language -> embedder map) on the mirror at ``data_root``
    and write ``out_dir``.

    Returns the content of ``metrics.json``: ``{"name", "metrics": {key: value}, "speed",
    "data_root", "sts", "sts17_tracks", "tatoeba_langs", "created"}``. ``speed`` is measured on
    the STS sentences (absent when ``sts=False``).

    Example:
        >>> import psp  # doctest: +SKIP
        >>> evaluate_embedder(psp.load("results/models/en"), "/work/shared/data", "results/eval/en")  # doctest: +SKIP
    """
    out_dir = Path(out_dir)
    name = name or out_dir.name
    evaluators = build_evaluators(data_root, sts, sts17_tracks, tatoeba_langs)
    # Only the STS evaluators embed through the timer: their English sentences are the benchmark.
    timed = TimedEmbedder(embedder_for(embedder, "en")) if sts else None
    rows: dict[str, list] = {table: [] for table in TABLES}
    metrics: dict[str, float] = {}
    for evaluator in evaluators:
        logger.info("%s: %s", name, evaluator.name)
        found = evaluator.compute(timed if evaluator.table == "sts" else embedder)
        rows[evaluator.table] += found
        metrics.update(evaluator.metrics(found))

    out_dir.mkdir(parents=True, exist_ok=True)
    columns = {evaluator.table: evaluator.columns for evaluator in evaluators}
    for table, table_rows in rows.items():
        if table_rows:
            write_rows(out_dir / f"{table}.csv", columns[table], table_rows)
        else:
            # A rerun with fewer benchmarks must not leave a stale table behind.
            (out_dir / f"{table}.csv").unlink(missing_ok=True)
    result = {
        "name": name,
        # NaN (constant predictions) becomes null: metrics.json stays strict JSON.
        "metrics": {key: None if math.isnan(value) else value for key, value in metrics.items()},
        "speed": timed.report() if timed else None,
        "data_root": str(data_root),
        "sts": sts,
        "sts17_tracks": list(sts17_tracks),
        "tatoeba_langs": list(tatoeba_langs),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    with atomic_open(out_dir / "metrics.json", "wt") as handle:
        json.dump(result, handle, indent=2)
        handle.write("\n")
    with atomic_open(out_dir / "tables.md", "wt") as handle:
        handle.write(f"# Evaluation: {name}\n\n")
        handle.write(combine_tables({name: out_dir}))
    return result
