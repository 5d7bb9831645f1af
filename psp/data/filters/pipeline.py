"""Streaming corpus filters: raw pairs (or sentences) in, clean ``.gz`` text plus stats out.

Each record goes through the filters in the order of :data:`REASONS` and is counted once,
under the first filter that removes it, so ``kept + sum(removed) == lines_in``:

1. ``invalid_utf8``: a side could not be decoded (the reader passed ``None``);
2. ``empty``: a side is empty after :func:`~psp.data.filters.text.clean_text`;
3. ``tab_in_sentence``: a side contains a tab;
4. ``length``: token count outside the bounds (see ``FilterConfig.length_side``);
5. ``duplicate``: the same (normalised, lowercased) record was already seen;
6. ``trigram``: the two sides overlap too much (pairs only);
7. ``score``: score below ``min_score`` (pairs only);
8. ``langid``: a side is not confidently in its expected language.

Cheap filters run first, in the parent, so the slow one (langid) only sees survivors; it runs in
a pool of worker processes over chunks, collected in order with a bounded number of chunks in
flight, so memory stays flat and the output does not depend on the number of workers.

Deduplication keeps the first copy of a repeated record. The original P-SP preprocessing
dropped every copy of a duplicated line instead; keeping one loses no distinct training pair.
Because dedup runs before langid, a record whose first copy fails langid loses its later
(identical) copies as duplicates.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tqdm.auto import tqdm

from psp.data.filters.config import FilterConfig
from psp.data.filters.dedup import SeenHashes
from psp.data.filters.language import LangidCheck, check_chunk, init_worker
from psp.data.filters.text import ngram_overlap, prepare_sentence, tokens
from psp.io import atomic_open, iter_batches

if TYPE_CHECKING:
    from psp.data.corpora import RawPair

REASONS = (
    "invalid_utf8",
    "empty",
    "tab_in_sentence",
    "length",
    "duplicate",
    "trigram",
    "score",
    "langid",
)
_RANK = {reason: i for i, reason in enumerate(REASONS)}

# (sides, score): one text per side, ``None`` for an undecodable side; the score may be None.
_Record = tuple[tuple[str | None, ...], float | None]


@dataclass
class _Chunk:
    """One chunk after the parent's filters, waiting for its langid verdicts."""

    reasons: list[str | None]
    outputs: list[tuple[str, ...]]
    langid_rows: list[int]
    langid_texts: list[tuple[str, ...]]


class _Filter:
    """The parent-side filters (1-7 of :data:`REASONS`) and the in-process langid check."""

    def __init__(self, cfg: FilterConfig, n_sides: int):
        self.cfg = cfg
        self.n_sides = n_sides
        self.seen = SeenHashes() if cfg.dedup else None
        self.langid = (
            LangidCheck(cfg.languages, cfg.langid_threshold, cfg.langid_candidates)
            if cfg.langid
            else None
        )
        self.trigrams = n_sides == 2 and cfg.max_trigram_overlap is not None
        # Tokenising is a fifth of the cheap filters' time: only the sides that the length
        # bound or the trigram filter look at are tokenised (bitext: the English side).
        if self.trigrams or (n_sides == 2 and cfg.length_side in ("both", "mean")):
            self.tokenized: tuple[int, ...] = tuple(range(n_sides))
        else:
            self.tokenized = (1,) if n_sides == 2 and cfg.length_side == "tgt" else (0,)
        self._model = None

    def prepare(self, records: list[_Record]) -> _Chunk:
        cfg = self.cfg
        reasons: list[str | None] = []
        outputs: list[tuple[str, ...]] = []
        normalized: list[tuple[str, ...]] = []
        words: list[dict[int, list[str]]] = []
        for sides, _ in records:
            checked = [prepare_sentence(text, cfg.lowercase) for text in sides]
            side_reasons = [reason for reason, _, _ in checked if reason is not None]
            reason = min(side_reasons, key=_RANK.__getitem__) if side_reasons else None
            normalized.append(tuple(norm for _, norm, _ in checked))
            outputs.append(tuple(out for _, _, out in checked))
            words.append({} if reason else {i: tokens(checked[i][1]) for i in self.tokenized})
            if reason is None and not self._length_ok(words[-1]):
                reason = "length"
            reasons.append(reason)

        if self.seen is not None:
            rows = _alive(reasons)
            is_new = self.seen.add(["\t".join(outputs[i]) for i in rows])
            for i, new in zip(rows, is_new, strict=True):
                if not new:
                    reasons[i] = "duplicate"

        if self.trigrams:
            for i in _alive(reasons):
                src, tgt = ([w.lower() for w in words[i][side]] for side in (0, 1))
                if ngram_overlap(src, tgt, 3) > cfg.max_trigram_overlap:
                    reasons[i] = "trigram"

        if self.n_sides == 2 and cfg.min_score is not None:
            rows = _alive(reasons)
            scores = self._scores([records[i][1] for i in rows], [outputs[i] for i in rows])
            for i, score in zip(rows, scores, strict=True):
                if score is not None and score < cfg.min_score:
                    reasons[i] = "score"

        rows = _alive(reasons) if self.langid is not None else []
        return _Chunk(reasons, outputs, rows, [normalized[i] for i in rows])

    def _length_ok(self, words: dict[int, list[str]]) -> bool:
        """Token counts of the bounded side(s) within ``[min_tokens, max_tokens]``."""
        cfg = self.cfg
        if self.n_sides == 1 or cfg.length_side == "src":
            measured = [len(words[0])]
        elif cfg.length_side == "tgt":
            measured = [len(words[1])]
        elif cfg.length_side == "both":
            measured = [len(words[0]), len(words[1])]
        else:
            measured = [(len(words[0]) + len(words[1])) / 2]
        return all(cfg.min_tokens <= n <= cfg.max_tokens for n in measured)

    def _scores(self, given: list[float | None], pairs: list[tuple[str, ...]]) -> list:
        """The corpus score where there is one, else the score model's cosine (in one batch)."""
        missing = [i for i, score in enumerate(given) if score is None]
        if not missing or self.cfg.score_model is None:
            return given
        if self._model is None:
            from psp.model.torch_model import load

            self._model = load(self.cfg.score_model)
        cosines = self._model.score([pairs[i][0] for i in missing], [pairs[i][1] for i in missing])
        scores = list(given)
        for i, cosine in zip(missing, cosines, strict=True):
            scores[i] = float(cosine)
        return scores


def _alive(reasons: list[str | None]) -> list[int]:
    return [i for i, reason in enumerate(reasons) if reason is None]


class _Tally:
    """Writes the records a chunk keeps, one tab-joined record a line, and counts the removed
    ones by reason."""

    def __init__(self, out: IO[str], bar: tqdm) -> None:
        self.out, self.bar = out, bar
        self.kept = 0
        self.removed: Counter[str] = Counter()

    def add(self, chunk: _Chunk, verdicts: list[bool]) -> None:
        """Record ``chunk``, whose language checks gave ``verdicts`` (one per langid row)."""
        for row, ok in zip(chunk.langid_rows, verdicts, strict=True):
            if not ok:
                chunk.reasons[row] = "langid"
        for reason, sides in zip(chunk.reasons, chunk.outputs, strict=True):
            if reason is None:
                self.out.write("\t".join(sides) + "\n")
                self.kept += 1
            else:
                self.removed[reason] += 1
        self.bar.update(len(chunk.reasons))


def _filter_chunks(
    records: Iterable[_Record], *, filt: _Filter, tally: _Tally, pool, workers: int, chunk_size: int
) -> int:
    """Filter ``records`` chunk by chunk into ``tally``, in input order, language checks in
    ``pool`` (or here when it is ``None``); returns the number of records read.

    Not Pool.imap: its feeder thread drains the input iterator as fast as it can, so memory
    would grow with the corpus; here at most 2 * workers chunks wait.
    """
    pending: deque = deque()  # chunks in flight, oldest first
    lines_in = 0

    def finish(max_pending: int) -> None:
        while len(pending) > max_pending:
            chunk, verdicts = pending.popleft()
            tally.add(chunk, verdicts.get() if pool is not None else verdicts)

    for batch in iter_batches(records, chunk_size):
        lines_in += len(batch)
        chunk = filt.prepare(batch)
        if pool is not None:
            verdicts = pool.apply_async(check_chunk, (chunk.langid_texts,))
        elif filt.langid is not None:
            verdicts = filt.langid(chunk.langid_texts)
        else:
            verdicts = []
        pending.append((chunk, verdicts))
        finish(max_pending=2 * workers)
    finish(max_pending=0)
    return lines_in


def _run(
    records: Iterable[_Record],
    *,
    n_sides: int,
    cfg: FilterConfig,
    out_path: str | os.PathLike,
    stats_path: str | os.PathLike,
    workers: int,
    chunk_size: int,
) -> dict[str, Any]:
    """Filter ``records`` into ``out_path`` (one tab-joined record a line) and write the stats."""
    if workers < 1 or chunk_size < 1:
        raise ValueError(f"workers and chunk_size must be >= 1, got {workers}, {chunk_size}")
    filt = _Filter(cfg, n_sides)  # loads langid here, so forked workers inherit it
    with contextlib.ExitStack() as stack:
        pool = None
        if cfg.langid and workers > 1:
            initargs = (cfg.languages, cfg.langid_threshold, cfg.langid_candidates)
            pool = stack.enter_context(
                multiprocessing.get_context().Pool(workers, init_worker, initargs)
            )
        out = stack.enter_context(atomic_open(out_path, "wt"))
        bar = stack.enter_context(tqdm(desc=Path(out_path).name, unit=" lines", disable=None))
        tally = _Tally(out, bar)
        lines_in = _filter_chunks(
            records, filt=filt, tally=tally, pool=pool, workers=workers, chunk_size=chunk_size
        )
    stats = {
        "lines_in": lines_in,
        "kept": tally.kept,
        "removed": {reason: tally.removed[reason] for reason in REASONS},
        "config": cfg.to_dict(),
        "languages": list(cfg.languages),
    }
    with atomic_open(stats_path, "wt") as handle:
        json.dump(stats, handle, indent=2)
        handle.write("\n")
    return stats


def filter_pairs(
    pairs: Iterable[RawPair],
    cfg: FilterConfig,
    out_path: str | os.PathLike,
    *,
    stats_path: str | os.PathLike,
    workers: int = 1,
    chunk_size: int = 2000,
) -> dict[str, Any]:
    """Filter sentence pairs into ``out_path`` (``src<TAB>tgt`` lines, ``.gz`` by suffix).

    Streams: memory holds a few chunks plus 8 bytes per distinct pair for deduplication. Both
    files are written atomically; if ``pairs`` raises (e.g. :class:`psp.io.InputError` for
    line counts that do not match), neither file is left behind.

    Args:
        pairs: objects with ``src``, ``tgt`` (``None`` for undecodable text) and ``score``
            (``None`` where the corpus has none), such as :class:`psp.data.corpora.RawPair`.
        cfg: see :class:`FilterConfig`; :meth:`FilterConfig.bitext` and
            :meth:`FilterConfig.paraphrase` are the usual presets.
        out_path: the clean pairs, lowercased when ``cfg.lowercase``.
        stats_path: ``filter_stats.json``: ``lines_in``, ``kept``, ``removed`` per reason (in
            filter order, see the module docstring), ``config`` and ``languages``.
        workers: processes for language identification (the slow filter); the output is the
            same for any number.
        chunk_size: pairs per unit of work.

    Returns:
        The stats written to ``stats_path``.

    Example:
        >>> from psp.data.corpora import iter_pairs
        >>> stats = filter_pairs(iter_pairs(root, "bitext/es-en/wmt-newstest", ("es", "en")),
        ...                      FilterConfig.bitext("es"), "pairs.tsv.gz",
        ...                      stats_path="filter_stats.json")
    """
    if len(cfg.languages) != 2:
        raise ValueError(f"filter_pairs needs two languages, got {cfg.languages}")
    records = (((pair.src, pair.tgt), pair.score) for pair in pairs)
    return _run(
        records,
        n_sides=2,
        cfg=cfg,
        out_path=out_path,
        stats_path=stats_path,
        workers=workers,
        chunk_size=chunk_size,
    )


def filter_sentences(
    lines: Iterable[str | None] | Iterable[tuple[str | None, str]],
    lang: str,
    cfg: FilterConfig | None,
    *,
    out_path: str | os.PathLike,
    stats_path: str | os.PathLike,
    workers: int = 1,
    chunk_size: int = 2000,
) -> dict[str, Any]:
    """Filter monolingual sentences (mining input) into ``out_path``, one a line (``.txt.gz``).

    The same per-sentence path and stats layout as :func:`filter_pairs`: normalisation, empty,
    tab, length, dedup and langid against ``lang``. The pair-only settings of ``cfg``
    (``length_side``, ``max_trigram_overlap``, ``min_score``, ``score_model``) do not apply, and
    ``lang`` replaces ``cfg.languages``. ``cfg=None`` means :meth:`FilterConfig.monolingual`,
    which keeps the case: mined pairs should show the sentences as written, and the model
    lowercases on its own.

    Args:
        lines: sentences, or ``(sentence, where)`` tuples; ``None`` marks undecodable text.
    """
    cfg = FilterConfig.monolingual(lang) if cfg is None else cfg
    cfg = dataclasses.replace(cfg, languages=(lang,))
    records = (((line[0] if isinstance(line, tuple) else line,), None) for line in lines)
    return _run(
        records,
        n_sides=1,
        cfg=cfg,
        out_path=out_path,
        stats_path=stats_path,
        workers=workers,
        chunk_size=chunk_size,
    )
