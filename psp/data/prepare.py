"""The data stage of one model: its corpora, read in the mirror layout, through the filters.

One function per workflow step, so the rule scripts and the CLI share them.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from psp.data.corpora import RawPair, iter_pairs, iter_sentences
from psp.data.filters import FilterConfig, filter_pairs, filter_sentences
from psp.data.sentence_files import Fields
from psp.io import InputError

log = logging.getLogger(__name__)


def filter_config_for(
    model_type: str, languages: Sequence[str], settings: dict[str, Any]
) -> FilterConfig:
    """The type's preset (bitext or paraphrase) with the configured ``settings`` on top."""
    if model_type == "bitext":
        return FilterConfig.bitext(languages[0], **settings)
    if model_type == "paraphrase":
        return FilterConfig.paraphrase(**settings)
    raise ValueError(f"unknown model type {model_type!r} (bitext or paraphrase)")


def iter_corpora(
    data_root: str | os.PathLike,
    corpora: Sequence[str],
    languages: Sequence[str],
    max_pairs: dict[str, int] | None = None,
) -> Iterator[RawPair]:
    """All pairs of ``corpora`` in order; a corpus listed in ``max_pairs`` stops at its cap."""
    max_pairs = max_pairs or {}
    for corpus in corpora:
        log.info(
            "reading %s%s", corpus, f" (first {max_pairs[corpus]:,})" if corpus in max_pairs else ""
        )
        yield from itertools.islice(
            iter_pairs(data_root, corpus, tuple(languages)), max_pairs.get(corpus)
        )


def prepare_pairs(
    data_root: str | os.PathLike,
    *,
    model_type: str,
    corpora: Sequence[str],
    languages: Sequence[str],
    filters: dict[str, Any],
    out_pairs: str | os.PathLike,
    out_stats: str | os.PathLike,
    max_pairs: dict[str, int] | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """Corpora → ``pairs.tsv.gz`` + ``filter_stats.json`` (both written atomically)."""
    cfg = filter_config_for(model_type, languages, filters)
    pairs = iter_corpora(data_root, corpora, languages, max_pairs)
    stats = filter_pairs(pairs, cfg, out_pairs, stats_path=out_stats, workers=workers)
    log.info("kept %d of %d pairs: %s", stats["kept"], stats["lines_in"], stats["removed"])
    return stats


def prepare_sentences(
    data_root: str | os.PathLike | None,
    *,
    refs: Sequence[str],
    lang: str,
    filters: dict[str, Any],
    out_text: str | os.PathLike,
    out_stats: str | os.PathLike,
    workers: int = 1,
    fields: Fields = Fields(),
) -> dict[str, Any]:
    """Monolingual mining input: ``refs`` (mirror ids or files: text, or JSON Lines and Parquet
    read through ``fields``) → filtered ``.txt.gz``, case kept.

    A side where no line survives is an error naming its inputs: mining it would only produce an
    empty result three jobs later.
    """
    cfg = FilterConfig.monolingual(lang, **filters)
    lines = itertools.chain.from_iterable(iter_sentences(data_root, ref, fields) for ref in refs)
    stats = filter_sentences(
        lines, lang, cfg, out_path=out_text, stats_path=out_stats, workers=workers
    )
    if stats["kept"] == 0:
        Path(out_text).unlink(missing_ok=True)
        raise InputError(
            f"no {lang} line of {', '.join(map(str, refs))} passed the filters "
            f"({stats['lines_in']} read, removed: {stats['removed']})"
        )
    log.info("kept %d of %d %s lines", stats["kept"], stats["lines_in"], lang)
    return stats
