"""The paper's Table 5: encoding speed against quality.

English news (120,000 sentences by default, repeated when the files hold fewer), sorted by
length, each encoder in its library's default batch size, on 1 thread and on all the threads it
is given, each setting in a fresh pinned process (:mod:`psp.evaluate.worker`: the rate of a
second pass, and of the first), with its load time, peak RSS and the memory the encoder itself
costs beside its STS average. A peer whose package is not installed is skipped with
a logged note. Run by the workflow's ``speed`` rule and by ``psp speed``; the plot is
:func:`psp.report.figures.plot_speed_quality`.
"""

from __future__ import annotations

import csv
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path

from psp.evaluate.results import sts_average
from psp.evaluate.worker import run_worker
from psp.io import InputError, atomic_open, read_lines, temp_dir

logger = logging.getLogger(__name__)

COLUMNS = (
    "encoder",
    "kind",
    "threads",
    "sentences",
    "sentences_per_s",
    "first_pass_per_s",
    "cpu_s",
    "load_s",
    "peak_rss_mib",
    "encoder_mib",
    "sts_avg",
)
#: The English news of the data mirror: newstest, monolingual and the bitexts' English sides.
NEWS_FILES = (
    "mono/en/wmt-newstest-en.txt.gz",
    *(
        f"bitext/{pair}/wmt-newstest.en.gz"
        for pair in ("de-en", "ru-en", "fr-en", "zh-en", "es-en", "tr-en")
    ),
)


def speed_sentences(files: Sequence[str | os.PathLike], n: int) -> list[str]:
    """``n`` sentences from ``files``, shortest first.

    Distinct non-empty lines in file order, cut to ``n`` or repeated up to it, then sorted by
    length in characters (stable), as the paper batches: similar lengths share a batch, so
    padded encoders waste little.
    """
    lines = list(dict.fromkeys(line for path in files for line in read_lines(path) if line))
    if not lines:
        raise InputError(f"no sentences in {', '.join(map(str, files))}")
    repeated = (lines * math.ceil(n / len(lines)))[:n]
    return sorted(repeated, key=len)


def encoder_table(
    models: Sequence[str], peers: Sequence[str], eval_root: str | os.PathLike
) -> list[dict]:
    """The encoders of a run: our model directories (label: the directory name, evaluation
    ``{eval_root}/{label}``), then peer specs (evaluation ``{eval_root}/peers/{label}``)."""
    from psp.evaluate.peers import spec_label

    eval_root = Path(eval_root)
    table = []
    for model in models:
        label = Path(model).name
        spec = f"psp:{model}"
        table.append({"encoder": label, "kind": "psp", "spec": spec, "eval_dir": eval_root / label})
    for spec in peers:
        label = spec_label(spec)
        table.append(
            {
                "encoder": label,
                "kind": "peer",
                "spec": spec,
                "eval_dir": eval_root / "peers" / label,
            }
        )
    return table


def measure_speed(
    encoders: Sequence[dict], sentences: Sequence[str], threads: int, out_csv: str | os.PathLike
) -> list[dict]:
    """Time every encoder on 1 thread and on ``threads``; write the CSV.

    ``encoders``: dicts with ``encoder`` (label), ``kind`` (``psp`` or ``peer``), ``spec``
    (:mod:`psp.evaluate.peers`) and ``eval_dir`` (its evaluation, or ``None``). Rows follow
    :data:`COLUMNS`; ``sts_avg`` is empty for an encoder that was not evaluated.
    """
    settings = sorted({1, max(1, int(threads))})
    rows = []
    with temp_dir("psp-speed") as tmp:
        sentences_path = tmp / "sentences.txt"
        sentences_path.write_text("".join(f"{s}\n" for s in sentences), encoding="utf-8")
        for encoder in encoders:
            quality = sts_average(encoder.get("eval_dir"))
            for n_threads in settings:
                logger.info("speed: %s on %d thread(s)", encoder["encoder"], n_threads)
                found = run_worker(encoder["spec"], n_threads, sentences_path)
                if found is None:
                    break
                row = {
                    "encoder": encoder["encoder"],
                    "kind": encoder["kind"],
                    "threads": n_threads,
                    "sentences": found["sentences"],
                    "sentences_per_s": round(found["sentences"] / found["seconds"], 1),
                    "first_pass_per_s": round(found["sentences"] / found["first_pass_s"], 1),
                    "cpu_s": round(found["cpu_s"], 3),
                    "load_s": round(found["load_s"], 3),
                    "peak_rss_mib": round(found["peak_rss_mib"], 1),
                    "encoder_mib": round(found["encoder_mib"], 1),
                    "sts_avg": "" if quality is None else round(quality, 2),
                }
                # Logged as measured: on a long run, what is done is known before the CSV.
                logger.info("speed: %s", row)
                rows.append(row)
    write_csv(out_csv, rows)
    return rows


def write_csv(path: str | os.PathLike, rows: Sequence[dict]) -> None:
    with atomic_open(path, "wt") as handle:
        writer = csv.DictWriter(handle, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
