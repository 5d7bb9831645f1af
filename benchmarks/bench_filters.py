"""Language identification and the whole filter chain, old against new, in one run.

* The identifier, per language: on lines spread evenly over every bitext side of the mirror's
  seven languages (and English; each side's language is known), the share labelled with the
  side's language and the lines per CPU-second of one worker. *old* is the identifier this
  project used before: langid.py's model, one sentence at a time (its feature vector, then the
  rows of the features present); it runs only where the ``langid`` package is installed.
  *plain* is :class:`psp.data.filters.language.LanguageIdentifier` without its alphabet rule
  (py3langid's answers, from the same model, a chunk at a time), *new* the identifier with it,
  both in chunks of the filter's size.
* The Russian filter on Tatoeba (held out): the share of Russian sentences it keeps and of
  Ukrainian, Bulgarian, Belarusian, Macedonian, Serbian, Kazakh, Mongolian and English ones it
  wrongly keeps, plain against new.
* ``filter_pairs``, the whole chain, on a bitext and a paraphrase corpus: langid off (the
  cheap filters, dedup and the gzip writer), langid on with the old identifier plugged into
  the same chain, langid on with the new one, and the new one with 2 workers. The new runs'
  outputs must be identical; whether the old run's matches is printed.
* The dedup store, :class:`psp.data.filters.dedup.SeenHashes`, against a Python ``set`` of the same
  64-bit hashes: bytes per entry (tracemalloc) and time, on synthetic distinct keys.

Rates per CPU-second count every process of a run (the pool workers too), so they estimate
what one dedicated core does on a machine shared with other jobs; the load average is printed.

    python benchmarks/bench_filters.py [--lines-per-language 20000] [--pairs 20000]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import itertools
import os
import tempfile
import time
import tracemalloc
from pathlib import Path
from unittest import mock

import numpy as np

from psp.data.corpora import iter_pairs
from psp.data.filters import FilterConfig, clean_text, filter_pairs
from psp.data.filters import language as language_module
from psp.data.filters.dedup import SeenHashes, hash64
from psp.data.filters.language import LangidCheck, LanguageIdentifier

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PSP_SHARED_DATA", REPO.parent / "shared" / "data"))
LANGUAGES = ("ar", "de", "es", "fr", "ru", "tr", "zh", "en")
CHAIN_CORPORA = {
    "bitext/de-en/wmt-newstest": FilterConfig.bitext("de"),
    "paraphrase/parasci/acl-train": FilterConfig.paraphrase(),
}
CHUNK = 2000  # filter_pairs' default chunk_size


class PreviousIdentifier:
    """The identifier before py3langid: langid.py's model, one sentence at a time.

    Per sentence, langid.py's ``instance2fv`` walks the bytes through the n-gram automaton in
    Python and returns the dense feature counts; only the rows of the features present are
    summed. Same interface as :class:`LanguageIdentifier`, so the chain can use either.
    """

    def __init__(self):
        from langid.langid import LanguageIdentifier as Langid
        from langid.langid import model

        self.model = Langid.from_modelstring(model, norm_probs=True)
        self.languages = list(self.model.nb_classes)

    def identify(self, texts):
        top, prob = np.empty(len(texts), dtype=np.int64), np.empty(len(texts))
        for i, text in enumerate(texts):
            features = self.model.instance2fv(text)
            present = np.flatnonzero(features)
            log_prob = features[present] @ self.model.nb_ptc[present] + self.model.nb_pc
            top[i] = int(np.argmax(log_prob))
            prob[i] = 1.0 / float(np.exp(log_prob - log_prob[top[i]]).sum())
        return top, prob


def previous_identifier() -> PreviousIdentifier | None:
    try:
        return PreviousIdentifier()
    except ImportError:
        return None


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the pool workers, once joined)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def bitext_side(lang: str, n: int) -> list[str]:
    """``n`` lines spread evenly over every bitext side in ``lang``, normalised as the filter
    does before identifying, empty lines dropped."""
    lines: list[str] = []
    for path in sorted(DATA.glob(f"bitext/*-en/*.{lang}.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            lines.extend(handle)
    step = max(1, len(lines) // n)
    return [text for text in map(clean_text, lines[::step][:n]) if text]


def identify_in_chunks(identifier, texts: list[str]) -> tuple[np.ndarray, np.ndarray, float]:
    """Labels, probabilities and CPU seconds of identifying ``texts`` chunk by chunk."""
    start = time.process_time()
    parts = [identifier.identify(texts[i : i + CHUNK]) for i in range(0, len(texts), CHUNK)]
    seconds = time.process_time() - start
    labels = np.array(identifier.languages)[np.concatenate([top for top, _ in parts])]
    return labels, np.concatenate([prob for _, prob in parts]), seconds


def identifier_figures(old: PreviousIdentifier | None, lines_per_language: int) -> None:
    identifiers = {"plain": LanguageIdentifier(alphabet_rule=False), "new": LanguageIdentifier()}
    if old is not None:
        identifiers = {"old": old, **identifiers}
    for identifier in identifiers.values():
        identifier.identify(["warm up"])
    print(
        f"identifier on bitext sides, up to {lines_per_language} lines per language (share "
        "labelled with the side's language; lines per CPU-second, one worker); old: langid.py "
        "one line at a time, plain: batched without the alphabet rule, new: with it"
    )
    print("  " + " " * 12 + "".join(f"{name:>20s}" for name in identifiers))
    totals = {name: [0, 0.0] for name in identifiers}
    for lang in LANGUAGES:
        texts = bitext_side(lang, lines_per_language)
        cells = []
        for name, identifier in identifiers.items():
            labels, _, seconds = identify_in_chunks(identifier, texts)
            totals[name][0] += len(texts)
            totals[name][1] += seconds
            cells.append(f"{np.mean(labels == lang):8.2%} {len(texts) / seconds:8,.0f}/s")
        print(f"  {lang:4s} {len(texts):6d} " + "".join(f"{cell:>20s}" for cell in cells))
    rates = {name: n / seconds for name, (n, seconds) in totals.items()}
    summary = ", ".join(f"{name} {rate:,.0f} lines/s" for name, rate in rates.items())
    if "old" in rates:
        summary += f"; new / old {rates['new'] / rates['old']:.1f}x"
    print(f"  all languages: {summary}")


def russian_filter_figures() -> None:
    """The Russian filter's real job on held-out Tatoeba sentences: keep the Russian ones, drop
    those of its Cyrillic neighbours (and English), with and without the alphabet rule."""
    print("Russian langid filter (threshold 0.5) on Tatoeba, share passed as Russian:")
    checks = {"plain": LangidCheck(["ru"], 0.5, None), "new": LangidCheck(["ru"], 0.5, None)}
    checks["plain"].identifier = LanguageIdentifier(alphabet_rule=False)
    for code in ("rus", "ukr", "bul", "bel", "mkd", "srp", "kaz", "mon", "eng"):
        pair = "rus" if code == "eng" else code
        with open(DATA / "tatoeba" / f"tatoeba.{pair}-eng.{code}", encoding="utf-8") as handle:
            records = [(text,) for text in map(clean_text, handle) if text]
        shares = "  ".join(
            f"{name} {np.mean(check(records)):6.1%}" for name, check in checks.items()
        )
        verdict = "keep" if code == "rus" else "drop"
        print(f"  {code} ({verdict}, {len(records)} lines): {shares}")


def timed_filter(pairs, cfg, workers: int, out: Path) -> tuple[float, float, dict, bytes]:
    """Wall seconds, CPU seconds (all processes), stats and output bytes of one run."""
    start, start_cpu = time.perf_counter(), cpu_seconds()
    stats = filter_pairs(pairs, cfg, out, stats_path=out.with_suffix(".json"), workers=workers)
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - start_cpu
    with gzip.open(out, "rb") as handle:
        return seconds, cpu, stats, handle.read()


def chain_figures(corpus: str, cfg: FilterConfig, *, n_pairs: int, old, out_dir: Path) -> None:
    pairs = list(itertools.islice(iter_pairs(DATA, corpus), n_pairs))
    print(f"filter_pairs on {corpus}, {len(pairs)} pairs:")
    runs = [("langid off, 1 worker", FilterConfig.from_dict({**cfg.to_dict(), "langid": False}), 1)]
    if old is not None:
        runs.append(("old langid, 1 worker", cfg, 1))
    runs += [("new langid, 1 worker", cfg, 1), ("new langid, 2 workers", cfg, 2)]
    outputs, rates = {}, {}
    for name, run_cfg, workers in runs:
        plug_old = name.startswith("old")
        patch = mock.patch.object(language_module, "load_identifier", lambda _: old)
        with patch if plug_old else contextlib.nullcontext():
            seconds, cpu, stats, data = timed_filter(pairs, run_cfg, workers, out_dir / "out.gz")
        rates[name] = len(pairs) / cpu
        if run_cfg.langid:
            outputs[name] = (stats["kept"], stats["removed"], data)
        print(
            f"  {name:22s}: {len(pairs) / seconds:7,.0f} pairs/s wall, "
            f"{rates[name]:7,.0f} per CPU-second; kept {stats['kept']}, "
            f"langid removed {stats['removed']['langid']}"
        )
    new_outputs = [repr(value) for name, value in outputs.items() if name.startswith("new")]
    assert len(set(new_outputs)) == 1, "the new langid's outputs differ between worker counts"
    if old is not None:
        ratio = rates["new langid, 1 worker"] / rates["old langid, 1 worker"]
        same = repr(outputs["old langid, 1 worker"]) == new_outputs[0]
        print(f"  new / old per CPU-second: {ratio:.1f}x; old and new outputs identical: {same}")


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
    parser.add_argument("--lines-per-language", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--dedup-keys", type=int, default=1_000_000)
    args = parser.parse_args()

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    old = previous_identifier()
    if old is None:
        print("langid is not installed: old figures skipped (pip install langid to get them)")
    identifier_figures(old, args.lines_per_language)
    russian_filter_figures()
    with tempfile.TemporaryDirectory() as tmp:
        for corpus, cfg in CHAIN_CORPORA.items():
            chain_figures(corpus, cfg, n_pairs=args.pairs, old=old, out_dir=Path(tmp))
    print(f"dedup store, {args.dedup_keys} distinct keys:")
    dedup_figures(args.dedup_keys)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
