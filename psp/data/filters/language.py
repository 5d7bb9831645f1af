"""Language identification with langid.py's model, batched for corpus filtering.

The model is langid.py's naive Bayes over byte n-grams (97 languages), as shipped by
``py3langid`` 0.3 (the maintained fork; 0.4 ships a retrained model, which labels 6 % of the
mirror's Chinese bitext side Wu Chinese and has another probability scale). Both packages
classify one sentence at a time: a Python loop steps through the sentence's UTF-8 bytes in the
n-gram automaton, then a dot product gives the class scores, about 5,000 sentences/s per core
(``benchmarks/bench_filters.py``).

:class:`LanguageIdentifier` classifies a whole chunk at once, with the same model and the same
arithmetic (float64 sums of the float32 weights, as langid.py does):

1. the sentences are sorted by byte length and grouped by powers of two, so padding at most
   doubles the work;
2. each group walks the automaton together: one vectorised step per byte position over the
   sentences still running;
3. every visited state that emits n-grams adds its precomputed weight row (the sum of its
   n-grams' rows), through one sparse count matrix times the state table.

One rule is added to the model: a Cyrillic language whose alphabet lacks a letter of the text is
never the answer (:data:`CYRILLIC_ALPHABETS`). The model's n-grams are at most 4 bytes, two
Cyrillic letters, and it scores only the n-grams present, so it cannot tell that a text with
"ы" is not Ukrainian or Bulgarian, nor that one with "і" is not Russian: 3.2 % of the mirror's
Russian bitext side came out Bulgarian, Ukrainian, Macedonian or Serbian. With the rule 2.7 %
does, and fewer Ukrainian, Belarusian and Kazakh Tatoeba sentences pass as Russian
(``benchmarks/bench_filters.py``). Restricting the candidate languages instead would keep the
wrong-language lines a filter exists to drop: without Bulgarian, Macedonian and Serbian as
candidates, 85 % of Tatoeba's Bulgarian sentences are labelled Russian.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The letters of the standard Cyrillic orthography of each Cyrillic language the model knows
# (lower case; Serbian and Kazakh are also written in Latin script, which the rule leaves alone).
CYRILLIC_ALPHABETS = {
    "be": "абвгдеёжзійклмнопрстуўфхцчшыьэюя",
    "bg": "абвгдежзийклмнопрстуфхцчшщъьюяѝ",
    "kk": "аәбвгғдеёжзийкқлмнңоөпрстуұүфхһцчшщъыіьэюя",
    "ky": "абвгдеёжзийклмнңоөпрстуүфхцчшщъыьэюя",
    "mk": "абвгдѓежзѕијклљмнњопрстќуфхцчџшѐѝ",
    "mn": "абвгдеёжзийклмноөпрстуүфхцчшщъыьэюя",
    "ru": "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
    "sr": "абвгдђежзијклљмнњопрстћуфхцчџш",
    "uk": "абвгґдеєжзиіїйклмнопрстуфхцчшщьюя",
}


@dataclass(frozen=True)
class _Model:
    """langid.py's model laid out for batched walks.

    ``next_state[(state << 8) + byte] = next << 8`` is the automaton (states kept multiplied
    by 256, so a step is one addition and one lookup); ``emitting[state]`` is the row of
    ``state_weights`` for a state that emits n-grams, else -1. ``state_weights`` holds, per
    emitting state, the sum of its n-grams' log-probability rows, in float64.
    """

    next_state: np.ndarray
    emitting: np.ndarray
    state_weights: np.ndarray
    class_prior: np.ndarray
    languages: tuple[str, ...]


@functools.lru_cache(maxsize=1)
def _model() -> _Model:
    """The model, decoded once per process (forked pool workers inherit it)."""
    from py3langid.langid import MODEL_FILE
    from py3langid.langid import LanguageIdentifier as _Py3Langid

    source = _Py3Langid.from_pickled_model(MODEL_FILE)
    feature_weights = np.asarray(source.nb_ptc, dtype=np.float64)
    next_state = np.frombuffer(source.tk_nextmove, dtype=np.uint16).astype(np.int32) << 8
    emitting = np.full(len(next_state) >> 8, -1, dtype=np.int32)
    states = sorted(state for state, features in source.tk_output.items() if features)
    state_weights = np.empty((len(states), feature_weights.shape[1]), dtype=np.float64)
    for row, state in enumerate(states):
        emitting[state] = row
        state_weights[row] = feature_weights[list(source.tk_output[state])].sum(axis=0)
    return _Model(
        next_state=next_state,
        emitting=emitting,
        state_weights=state_weights,
        class_prior=np.asarray(source.nb_pc, dtype=np.float64),
        languages=tuple(source.nb_classes),
    )


def known_languages() -> tuple[str, ...]:
    """The language codes the model can answer."""
    return _model().languages


class LanguageIdentifier:
    """langid.py's model with normalised probabilities, optionally restricted to ``candidates``.

    ``alphabet_rule`` excludes Cyrillic languages whose alphabet lacks a letter of the text (see
    the module docstring); without it the answers are py3langid's.

    Example:
        >>> LanguageIdentifier().classify("El gato duerme en la casa.")[0]
        'es'
    """

    def __init__(self, candidates: Sequence[str] | None = None, alphabet_rule: bool = True):
        model = _model()
        if candidates is None:
            columns = np.arange(len(model.languages))
        else:
            check_codes(candidates)
            wanted = set(candidates)
            columns = np.array([i for i, code in enumerate(model.languages) if code in wanted])
        self.languages: list[str] = [model.languages[i] for i in columns]
        self._weights = np.ascontiguousarray(model.state_weights[:, columns])
        self._prior = model.class_prior[columns]
        # lacks[c, j]: the alphabet of the j-th tabled candidate, self._tabled[j], lacks code
        # point U+0400 + c (either case); letters of no listed alphabet say nothing (all False).
        tabled = [i for i, code in enumerate(self.languages) if code in CYRILLIC_ALPHABETS]
        self._tabled = np.array(tabled if alphabet_rule else [], dtype=np.int64)
        listed = set("".join(CYRILLIC_ALPHABETS.values()))
        self._lacks = np.zeros((256, len(self._tabled)), dtype=np.uint8)
        for letter in listed:
            for j, i in enumerate(self._tabled):
                if letter not in CYRILLIC_ALPHABETS[self.languages[i]]:
                    for case in (letter, letter.upper()):
                        self._lacks[ord(case) - 0x400, j] = 1

    def classify(self, text: str) -> tuple[str, float]:
        """Most likely language of ``text`` and its normalised probability."""
        top, prob = self.identify([text])
        return self.languages[top[0]], float(prob[0])

    def identify(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """For each text, the index in :attr:`languages` of the most likely language, and its
        normalised probability (two arrays)."""
        scores = self._scores(texts)
        top = scores.argmax(axis=1)
        scores -= scores[np.arange(len(top)), top][:, None]
        prob = 1.0 / np.exp(scores).sum(axis=1)
        return top, prob

    def _scores(self, texts: Sequence[str]) -> np.ndarray:
        """Log-probability of each text under each language, up to a per-text constant."""
        encoded = [text.encode("utf-8", "surrogatepass") for text in texts]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        order = np.argsort(-lengths, kind="stable")
        scores = np.empty((len(encoded), len(self._prior)), dtype=np.float64)
        scores[:] = self._prior
        if len(encoded) == 0:
            return scores
        self._exclude_by_alphabet(encoded, lengths, scores)
        sorted_lengths = lengths[order]
        data = np.frombuffer(b"".join([encoded[i] for i in order]), dtype=np.uint8)
        # Groups of rows whose lengths share a bit length: padding to the group's longest
        # sentence at most doubles its bytes. Empty texts have no n-grams and keep the prior.
        group = np.maximum(sorted_lengths, 1).astype(np.float64)
        bounds = np.flatnonzero(np.diff(np.frexp(group)[1])) + 1
        starts = np.concatenate([[0], np.cumsum(sorted_lengths)])
        for first, last in zip(
            np.concatenate([[0], bounds]), np.concatenate([bounds, [len(order)]]), strict=True
        ):
            lens = sorted_lengths[first:last]
            if lens[0] == 0:
                break
            counts = _visit_counts(data[starts[first] : starts[last]], lens, len(self._weights))
            scores[order[first:last]] += counts @ self._weights
        return scores

    def _exclude_by_alphabet(self, encoded: list[bytes], lengths: np.ndarray, scores) -> None:
        """Set to -inf the score of every tabled Cyrillic language whose alphabet lacks a letter
        of the text. A text that every candidate is excluded for (letters of two alphabets, with
        only those languages as candidates) keeps the model's scores: the rule has no answer.

        Vectorised over the chunk's UTF-8 bytes: every byte 0xD0-0xD3 leads a two-byte code
        point U+0400-U+04FF (it cannot be a continuation byte), decoded with its successor.
        """
        if not self._lacks.any():
            return
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        lead = np.flatnonzero((data >= 0xD0) & (data <= 0xD3))
        if len(lead) == 0:
            return
        letter = ((data[lead].astype(np.int64) & 0x1F) << 6 | data[lead + 1] & 0x3F) - 0x400
        text = np.searchsorted(np.cumsum(lengths), lead, side="right")
        present = np.zeros((len(encoded), 256), dtype=np.uint8)
        present[text, letter] = 1
        excluded = (present @ self._lacks) > 0
        if len(self._tabled) == len(self.languages):
            excluded[excluded.all(axis=1)] = False
        rows, columns = np.nonzero(excluded)
        scores[rows, self._tabled[columns]] = -np.inf


def _visit_counts(data: np.ndarray, lengths: np.ndarray, n_rows: int):
    """Sparse ``(len(lengths), n_rows)`` counts of emitting states visited per sentence.

    ``data`` holds the sentences' bytes back to back, ``lengths`` their byte lengths (sorted in
    decreasing order, the first non-zero).
    """
    from scipy.sparse import csr_matrix

    model = _model()
    n, width = len(lengths), int(lengths[0])
    inside = np.arange(width)[None, :] < lengths[:, None]
    padded = np.zeros((n, width), dtype=np.uint8)
    padded[inside] = data
    by_position = np.ascontiguousarray(padded.T)
    # running[t]: how many sentences are longer than t bytes (a prefix, lengths decrease)
    running = np.searchsorted(-lengths, -np.arange(width), side="left")
    # States are kept multiplied by 256, so one addition of the byte gives the table index.
    visited = np.empty((width, n), dtype=np.int32)
    index = np.empty(n, dtype=np.int32)
    state = np.zeros(n, dtype=np.int32)
    for t, k in enumerate(running.tolist()):
        np.add(state[:k], by_position[t, :k], out=index[:k])
        model.next_state.take(index[:k], out=visited[t, :k])
        state = visited[t]
    rows = model.emitting[visited.T[inside] >> 8]
    emits = rows >= 0
    emitted_before = np.concatenate([[0], np.cumsum(emits)])
    indptr = emitted_before[np.concatenate([[0], np.cumsum(lengths)])]
    columns = rows[emits]
    return csr_matrix((np.ones(len(columns), dtype=np.float64), columns, indptr), shape=(n, n_rows))


def check_codes(codes: Sequence[str]) -> None:
    """Raise ``ValueError`` naming any code the model does not know."""
    unknown = [code for code in codes if code not in known_languages()]
    if unknown:
        raise ValueError(f"langid.py does not know language code(s) {unknown}")


@functools.lru_cache(maxsize=4)
def load_identifier(candidates: tuple[str, ...] | None) -> LanguageIdentifier:
    """One identifier per candidate set and process.

    Cached at module level, so pool workers forked after the parent loaded it start at once.
    """
    return LanguageIdentifier(candidates)


class LangidCheck:
    """Is every side of a record confidently in its expected language?"""

    def __init__(
        self, languages: Sequence[str], threshold: float, candidates: tuple[str, ...] | None
    ):
        check_codes(languages)
        self.identifier = load_identifier(candidates)
        self.expected = [self.identifier.languages.index(code) for code in languages]
        self.threshold = threshold

    def __call__(self, records: Sequence[Sequence[str]]) -> list[bool]:
        """The verdict of each record. A side is identified only while the record's earlier
        sides passed: a record that already failed needs no more work."""
        passed = np.ones(len(records), dtype=bool)
        for side, expected in enumerate(self.expected):
            rows = np.flatnonzero(passed)
            if len(rows) == 0:
                break
            top, prob = self.identifier.identify([records[i][side] for i in rows])
            passed[rows] = (top == expected) & (prob >= self.threshold)
        return passed.tolist()


# Pool workers keep their check here, set once by the initializer, so each task ships only text.
_WORKER_CHECK: LangidCheck | None = None


def init_worker(languages: tuple[str, ...], threshold: float, candidates: tuple[str, ...] | None):
    """Pool initializer: build the process's :class:`LangidCheck`."""
    global _WORKER_CHECK
    _WORKER_CHECK = LangidCheck(languages, threshold, candidates)


def check_chunk(records: list[tuple[str, ...]]) -> list[bool]:
    """Pool task: the langid verdict of each record of a chunk, in order."""
    assert _WORKER_CHECK is not None, "init_worker was not called in this process"
    return _WORKER_CHECK(records)
