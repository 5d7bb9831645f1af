"""The settings of one filtering run, with the presets the pipeline uses.

Each key is declared in ``psp/config.schema.yaml`` (``definitions.filters``, and
``filters_library`` for ``languages``, which the workflow takes from the model). The schema
gives the filter keys no default, since a key a model leaves out takes its type's preset; their
plain defaults are written here, once.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from psp.config_schema import config_class, from_mapping

LengthSide = Literal["src", "tgt", "both", "mean"]


@config_class("#/definitions/filters", "#/definitions/filters_library", frozen=True)
class FilterConfig:
    """What to remove from a corpus before training (or before mining).

    Args:
        languages: expected language of each side, langid.py codes: ``("es", "en")`` for bitext,
            ``("en", "en")`` for an English paraphrase corpus, one code for monolingual text.
        lowercase: lowercase the written (and deduplicated) text. Training pairs are lowercased,
            as the P-SP models are; mining input keeps its case (see :meth:`monolingual`).
        dedup: drop exact repeats of a pair after normalisation (and lowercasing), keeping the
            first copy.
        length_side: which side's token count must lie in ``[min_tokens, max_tokens]``: one side,
            ``"both"`` sides, or the ``"mean"`` of the two. Bitext bounds the English side only,
            since languages written without spaces have no meaningful word count.
        min_tokens, max_tokens: inclusive bounds on words plus punctuation marks.
        langid: check each side's language with langid.py.
        langid_threshold: a side passes when langid.py's top language is the expected one and its
            normalised probability is at least this.
        langid_candidates: languages langid.py may answer; ``None`` means all 97 it knows. The wide
            set is the honest default: restricted to ``("es", "en")`` it would call a French or
            Catalan line Spanish and keep it.
        max_trigram_overlap: drop pairs whose word-trigram overlap (share of the shorter sentence's
            trigrams found in the other, see :func:`psp.data.filters.text.ngram_overlap`) exceeds
            this; for English-English paraphrase corpora, where near-copies teach nothing.
            ``None`` = off.
        min_score: drop pairs whose score is below this. The score is the corpus's own score
            column where the pair has one (ParaNMT), else the cosine of ``score_model``, else the
            pair is not scored. ``None`` = off.
        score_model: a model directory for :func:`psp.load`, used to score pairs without a score.
    """

    languages: tuple[str, ...]
    lowercase: bool = True
    dedup: bool = True
    length_side: LengthSide = "tgt"
    min_tokens: int = 3
    max_tokens: int = 100
    langid: bool = True
    langid_threshold: float = 0.5
    langid_candidates: tuple[str, ...] | None = None
    max_trigram_overlap: float | None = 0.7
    min_score: float | None = 0.4
    score_model: str | None = None

    def _check(self) -> None:
        """What the schema cannot say: relations between keys."""
        if not isinstance(self.languages, tuple):
            raise ValueError(f"languages: expected a tuple of codes, got {self.languages!r}")
        if self.min_tokens > self.max_tokens:
            raise ValueError(
                f"need min_tokens <= max_tokens, got {self.min_tokens}, {self.max_tokens}"
            )
        if self.langid_candidates is not None:
            if not isinstance(self.langid_candidates, tuple):
                raise ValueError("langid_candidates must be a tuple of language codes or None")
            missing = [lang for lang in self.languages if lang not in self.langid_candidates]
            if missing:
                raise ValueError(f"langid_candidates lacks the expected language(s) {missing}")
        if self.score_model is not None and self.min_score is None:
            raise ValueError("score_model is set but min_score is None: nothing would use it")

    @classmethod
    def bitext(cls, lang: str, **overrides: Any) -> FilterConfig:
        """Bitext ``lang``-English: English side 3-100 tokens, langid on both sides, no trigram
        or score filter (the sides are in different languages and carry no score)."""
        settings = dict(
            languages=(lang, "en"),
            length_side="tgt",
            min_tokens=3,
            max_tokens=100,
            max_trigram_overlap=None,
            min_score=None,
        )
        return cls(**{**settings, **overrides})

    @classmethod
    def paraphrase(cls, **overrides: Any) -> FilterConfig:
        """English paraphrase pairs (ParaNMT-style): mean length 5-40 tokens, trigram overlap at
        most 0.7, score at least 0.4 where a score exists, langid English on both sides."""
        settings = dict(
            languages=("en", "en"),
            length_side="mean",
            min_tokens=5,
            max_tokens=40,
            max_trigram_overlap=0.7,
            min_score=0.4,
        )
        return cls(**{**settings, **overrides})

    @classmethod
    def monolingual(cls, lang: str, **overrides: Any) -> FilterConfig:
        """Mining input in ``lang``: case kept (the model lowercases internally and mined pairs
        should show the text as written), 3-100 tokens, langid, no pair-only filters."""
        settings = dict(
            languages=(lang,),
            lowercase=False,
            length_side="src",
            max_trigram_overlap=None,
            min_score=None,
        )
        return cls(**{**settings, **overrides})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FilterConfig:
        """Build from a plain mapping (YAML/JSON config); an unknown key is an error naming it."""
        if "languages" not in d:
            raise ValueError("filter settings need 'languages'")
        d = dict(d)
        for key in ("languages", "langid_candidates"):
            if isinstance(d.get(key), list):
                d[key] = tuple(d[key])
        return from_mapping(cls, d, "filter settings")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping that :meth:`from_dict` reads back."""
        d = dataclasses.asdict(self)
        for key in ("languages", "langid_candidates"):
            if d[key] is not None:
                d[key] = list(d[key])
        return d
