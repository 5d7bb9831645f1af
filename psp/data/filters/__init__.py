"""Corpus filters: normalise, deduplicate and clean sentence pairs (training) or sentences (mining).

Modules: :mod:`~psp.data.filters.text` (one path for a single sentence), :mod:`~psp.data.filters.config`
(:class:`FilterConfig` and presets), :mod:`~psp.data.filters.language` (langid.py),
:mod:`~psp.data.filters.dedup` (8-byte hash set), :mod:`~psp.data.filters.pipeline` (streaming runs, stats).
"""

from __future__ import annotations

from psp.data.filters.config import FilterConfig
from psp.data.filters.pipeline import REASONS, filter_pairs, filter_sentences
from psp.data.filters.text import clean_text

__all__ = ["REASONS", "FilterConfig", "filter_pairs", "filter_sentences", "clean_text"]
