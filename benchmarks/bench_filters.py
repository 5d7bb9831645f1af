"""Throughput of ``filter_pairs`` on real bitext: workers 1 vs 2, and what langid costs.

Runs, on the same pairs, in this process:

* langid.py's own ``classify`` against :class:`psp.filters.language.LanguageIdentifier` (which
  sums only the feature rows present) on a sample of sentences: the ratio is what the sparse
  dot product buys;
* ``filter_pairs`` with langid off (the cheap filters, dedup and the gzip writer: the baseline),
  then with langid on and ``workers`` 1 and 2; the output of every langid run must be identical;
* the dedup store, :class:`psp.filters.dedup.SeenHashes`, against a Python ``set`` of the same
  64-bit hashes: bytes per entry (tracemalloc) and time, on synthetic distinct keys.

The machine may be shared: the load average is printed next to the figures.

    python benchmarks/bench_filters.py [--corpus bitext/de-en/wmt-newstest] [--pairs 20000]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

from psp.corpora import iter_pairs
from psp.filters import FilterConfig, filter_pairs
from psp.filters.dedup import SeenHashes, hash64
from psp.filters.language import load_identifier

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PSP_SHARED_DATA", REPO.parent / "shared" / "data"))


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the pool workers, once joined)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed_filter(pairs, cfg, workers: int, out_dir: Path) -> tuple[float, float, dict, bytes]:
    """Wall seconds, CPU seconds (all processes), stats and output bytes of one run."""
    out = out_dir / f"pairs.w{workers}.langid{int(cfg.langid)}.tsv.gz"
    start, start_cpu = time.perf_counter(), cpu_seconds()
    stats = filter_pairs(pairs, cfg, out, out_dir / "filter_stats.json", workers=workers)
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - start_cpu
    with gzip.open(out, "rb") as handle:
        return seconds, cpu, stats, handle.read()


def dedup_figures(n_keys: int, batch: int = 2000) -> None:
    """Memory and time of SeenHashes against a set of the same hashes (the baseline)."""
    keys = [f"pair {i}\tsentence {i}" for i in range(n_keys)]

    def with_seen_hashes():
        seen = SeenHashes()
        for i in range(0, n_keys, batch):
            seen.add(keys[i : i + batch])
        return seen

    def with_set():
        seen = set()
        for i in range(0, n_keys, batch):
            seen.update(hash64(keys[i : i + batch]).tolist())
        return seen

    for name, build in [("set of ints", with_set), ("SeenHashes", with_seen_hashes)]:
        start = time.perf_counter()
        build()
        seconds = time.perf_counter() - start
        tracemalloc.start()
        store = build()
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del store
        print(
            f"  {name:11s}: {held / n_keys:5.1f} B/entry held, {peak / n_keys:5.1f} peak, "
            f"{n_keys / seconds:9.0f} keys/s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="bitext/de-en/wmt-newstest")
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--langid-sample", type=int, default=500)
    parser.add_argument("--dedup-keys", type=int, default=1_000_000)
    args = parser.parse_args()

    src_lang = args.corpus.split("/")[1].split("-")[0]
    pairs = list(itertools.islice(iter_pairs(DATA, args.corpus), args.pairs))
    print(f"{args.corpus}: {len(pairs)} pairs; load average {os.getloadavg()[0]:.2f}")

    identifier = load_identifier(None)  # decoded once here, so no run below pays for it
    sample = [pair.tgt for pair in pairs[: args.langid_sample]]
    rates = {}
    for name, classify in [
        ("langid.py", identifier.model.classify),
        ("sparse", identifier.classify),
    ]:
        start = time.perf_counter()
        for sentence in sample:
            classify(sentence)
        rates[name] = len(sample) / (time.perf_counter() - start)
        print(f"  {name:10s} classify: {rates[name]:8.0f} sentences/s")
    print(f"  sparse / langid.py: {rates['sparse'] / rates['langid.py']:.1f}x")

    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp)
        base_s, base_cpu, _, _ = timed_filter(
            pairs, FilterConfig.bitext(src_lang, langid=False), 1, out_dir
        )
        print(
            f"  no langid, 1 worker : {len(pairs) / base_s:8.0f} pairs/s "
            f"({len(pairs) / base_cpu:.0f} per CPU-second) (baseline)"
        )
        results = {}
        for workers in (1, 2):
            cfg = FilterConfig.bitext(src_lang)
            seconds, cpu, stats, data = timed_filter(pairs, cfg, workers, out_dir)
            results[workers] = (seconds, stats, data)
            print(
                f"  langid, {workers} worker(s): {len(pairs) / seconds:8.0f} pairs/s "
                f"({len(pairs) / cpu:.0f} per CPU-second; {base_s / seconds:.2f}x baseline); "
                f"kept {stats['kept']}, langid removed {stats['removed']['langid']}"
            )
        assert results[1][1:] == results[2][1:], "workers=1 and workers=2 outputs differ"
        print(f"  workers 2 / workers 1: {results[1][0] / results[2][0]:.2f}x (outputs identical)")
    print(f"dedup store, {args.dedup_keys} distinct keys:")
    dedup_figures(args.dedup_keys)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
