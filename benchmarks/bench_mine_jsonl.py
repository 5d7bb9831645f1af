"""Mining a JSON Lines corpus against the same sentences in plain text: time, peak memory, pairs.

``psp mine`` streams every input kind, so a corpus shipped as JSON Lines (one object a line,
the sentence under ``text``, a document id under ``id``) should cost what the same sentences
cost as plain text: the same peak RSS, a little more time to parse, and exactly the same pairs.
The source side is ``--lines`` lines sampled (seeded, with repeats) from every line of the
mirror's monolingual text and bitext sides; the target side is the first ``--tgt-lines``
English news sentences, plain text in both runs. Each run is ``psp mine --provenance`` in its
own process, the JSON Lines one also ``--id-field id``; exact search (``--ivf-min-size`` above
the pair's size), since the search is not what differs. Besides the whole run, the preparation
of the source side alone (``psp.mine.plan.shard_text_file``, where the formats differ) is timed
in its own process for each format.

Printed: one JSON object, each run's wall seconds and peak RSS (``ru_maxrss``) and their ratio
JSON Lines / plain text, and whether the mined pairs (score, texts, lines) are the same.

Usage:
    python benchmarks/bench_mine_jsonl.py --mirror /work/shared/data \\
        --model results/models/es-en --lines 1000000 --work /tmp/bench-jsonl
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FILES = ("src.txt", "src.jsonl", "tgt.txt")
PSP = [sys.executable, "-c", "import sys; from psp.cli import main; sys.exit(main())"]
PREPARE = (
    "import sys; from psp.mine.plan import shard_text_file; "
    "from psp.data.sentence_files import Fields; "
    "shard_text_file(sys.argv[1], 1, sys.argv[2], sys.argv[3], fields=Fields(doc_id=sys.argv[4] "
    "or None), out_origins=sys.argv[5])"
)


def pool(mirror: Path) -> list[str]:
    """Every distinct non-blank line of the mirror's monolingual text and bitext sides."""
    lines: dict[str, None] = {}
    for path in sorted([*mirror.glob("mono/*/*.gz"), *mirror.glob("bitext/*/*.gz")]):
        if path.name.endswith(".origin.gz"):
            continue
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            lines.update((line.strip(), None) for line in handle if line.strip())
    return list(lines)


def write_corpora(args) -> None:
    """The source side as plain text and as JSON Lines, and the target side (:data:`FILES`).

    Run in a process of its own: a child's peak RSS counts the pages of the parent it was
    forked from, which would otherwise hold the sentence pool."""
    sentences = pool(args.mirror)
    picks = np.random.default_rng(args.seed).integers(0, len(sentences), args.lines)
    files = {name: args.work / name for name in FILES}
    with open(files["src.txt"], "w") as text, open(files["src.jsonl"], "w") as records:
        for number, pick in enumerate(picks.tolist()):
            text.write(sentences[pick] + "\n")
            records.write(json.dumps({"id": f"doc-{number // 20}", "text": sentences[pick]}) + "\n")
    with gzip.open(args.mirror / "mono/en/wmt-newstest-en.txt.gz", "rt") as news:
        english = [next(news).strip() for _ in range(args.tgt_lines)]
    files["tgt.txt"].write_text("".join(f"{line}\n" for line in english))


def timed(cmd: list[str]) -> dict:
    """Run ``cmd`` to completion; its wall seconds and peak RSS."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr.read()[-3000:]}")
    return {"wall_s": round(wall, 1), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


def mined_rows(path: Path) -> list[list[str]]:
    """Score, texts and input lines of each mined pair (the id columns left out)."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n").split("\t")[:5] for line in handle]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--tgt-lines", type=int, default=2000)
    parser.add_argument("--work", type=Path, required=True, help="scratch folder (removed)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    try:
        writer = multiprocessing.get_context("spawn").Process(target=write_corpora, args=(args,))
        writer.start()
        writer.join()
        if writer.exitcode != 0:
            raise SystemExit("writing the corpora failed")
        files = {name: args.work / name for name in FILES}
        runs, prepared = {}, {}
        for kind, extra in (("text", []), ("jsonl", ["--id-field", "id"])):
            src = files["src.txt" if kind == "text" else "src.jsonl"]
            out = args.work / kind / "mined.tsv.gz"
            cmd = [*PSP, "mine", "--model", str(args.model), "--src-file", str(src)]
            cmd += ["--tgt-file", str(files["tgt.txt"]), "--output", str(out), "--provenance"]
            runs[kind] = timed([*cmd, "--ivf-min-size", str(10 * args.lines), *extra])
            runs[kind]["pairs"] = len(mined_rows(out))
            side = [str(args.work / kind / name) for name in ("s.txt.gz", "s.json", "s.o.gz")]
            doc_id = "id" if kind == "jsonl" else ""
            prepared[kind] = timed(
                [sys.executable, "-c", PREPARE, str(src), *side[:2], doc_id, side[2]]
            )
        same = mined_rows(args.work / "text/mined.tsv.gz") == mined_rows(
            args.work / "jsonl/mined.tsv.gz"
        )
        report = {
            "lines": args.lines,
            "tgt_lines": args.tgt_lines,
            "mine": runs,
            "prepare_source_side": prepared,
            "ratio_jsonl_to_text": {
                stage: {
                    key: round(times["jsonl"][key] / times["text"][key], 3)
                    for key in ("wall_s", "peak_rss_mib")
                }
                for stage, times in (("mine", runs), ("prepare_source_side", prepared))
            },
            "same_pairs": same,
        }
        print(json.dumps(report))
    finally:
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
