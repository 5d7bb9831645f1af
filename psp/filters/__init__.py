"""Corpus filters: normalise, deduplicate and clean sentence pairs (training) or sentences (mining).

Modules: :mod:`~psp.filters.text` (one path for a single sentence), :mod:`~psp.filters.config`
(:class:`FilterConfig` and presets), :mod:`~psp.filters.language` (langid.py),
:mod:`~psp.filters.dedup` (8-byte hash set), :mod:`~psp.filters.pipeline` (streaming runs, stats).
"""

from __future__ import annotations

from psp.filters.config import FilterConfig
from psp.filters.pipeline import REASONS, filter_pairs, filter_sentences
from psp.filters.text import clean_text

__all__ = ["REASONS", "FilterConfig", "filter_pairs", "filter_sentences", "clean_text"]
