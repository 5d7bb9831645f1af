"""Does an exported model embed as ``psp embed``? Piece ids and cosines on real text.

The text is every sentence of the data mirror's STS Benchmark (all splits, both columns) and of
its Tatoeba files in the model's languages (each ``tatoeba.{xx}-eng.{side}`` whose side is one
of them: for a model with English, the English side of every pair). The library that loads the
export is the caller's (tests, ``benchmarks/bench_export.py``): this module never imports it.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from psp.evaluate.readers import read_scored_pairs
from psp.evaluate.tatoeba import tatoeba_code
from psp.io import read_lines

__all__ = ["compare_ids", "compare_vectors", "mirror_lines", "psp_vectors"]

STSB_SPLITS = ("train", "dev", "test")


def mirror_lines(data_root: str | os.PathLike, languages: Sequence[str]) -> list[str]:
    """STS-B's sentences, then the Tatoeba sides in ``languages`` (ISO 639-1 codes), in order."""
    root = Path(data_root)
    lines: list[str] = []
    for split in STSB_SPLITS:
        pairs = read_scored_pairs(root / "sts" / "stsb" / f"{split}.tsv")
        lines += pairs.sent1 + pairs.sent2
    codes = {tatoeba_code(lang)[1] for lang in languages if lang != "en"}
    for path in sorted((root / "tatoeba").glob("tatoeba.*-eng.*")):
        side = path.name.rsplit(".", 1)[1]
        if side in codes or (side == "eng" and "en" in languages):
            lines += read_lines(path)
    return lines


def compare_ids(model_dir: str | os.PathLike, tokenizer, lines: Sequence[str]) -> dict:
    """SentencePiece's ids (on :func:`psp.model.text.model_text` text) against
    ``tokenizer``'s.

    Returns ``lines``, ``identical``, ``share`` and ``exceptions``: each differing line with
    both piece sequences and ``same_pieces`` (the same pieces in another order, e.g. a tie
    between two segmentations of equal score, which leaves the mean unchanged).
    """
    import sentencepiece

    from psp.model.directory import read_model_dir
    from psp.model.text import model_text

    config, encoder, _ = read_model_dir(model_dir)
    processor = sentencepiece.SentencePieceProcessor(model_proto=encoder.model_bytes)
    reference = processor.encode(model_text(lines, config.lowercase), out_type=int)
    found = [e.ids for e in tokenizer.encode_batch(list(lines), add_special_tokens=False)]
    exceptions = [
        {
            "line": line,
            "sentencepiece": [processor.id_to_piece(i) for i in want],
            "tokenizers": [tokenizer.id_to_token(i) for i in got],
            "same_pieces": Counter(want) == Counter(got),
        }
        for line, want, got in zip(lines, reference, found, strict=True)
        if want != got
    ]
    n = len(lines)
    return {
        "lines": n,
        "identical": n - len(exceptions),
        "share": (n - len(exceptions)) / n if n else 1.0,
        "exceptions": exceptions,
    }


def psp_vectors(model_dir: str | os.PathLike, lines: Sequence[str]) -> np.ndarray:
    """``psp embed``'s rows for ``lines`` (the same code path, without the file)."""
    from psp.model.pooling import load_table_model

    model = load_table_model(model_dir)
    ids, offsets = model.encoder.encode(list(lines))
    return model.pool(ids, offsets, np.empty((len(lines), model.dim), dtype=np.float32))


def compare_vectors(reference: np.ndarray, vectors: np.ndarray, lines: Sequence[str]) -> dict:
    """Cosine of every row of ``vectors`` to ``psp embed``'s ``reference`` row.

    A row psp leaves at zero (no known piece: empty, or only characters the vocabulary lacks)
    has no direction: such lines are counted apart, as ``zero_rows``, with the library's
    ``zero_rows_nonzero`` among them (a library averages the bare word boundary those
    characters leave, which psp drops). Returns also ``min_cosine`` over the other lines, the
    lines ``below`` 0.9999, and ``norm_ratio`` (min, max of library norm / psp norm).
    """
    ref_norm = np.linalg.norm(reference, axis=1)
    norm = np.linalg.norm(vectors, axis=1)
    zero = ref_norm == 0
    cosine = np.einsum("ij,ij->i", reference, vectors) / np.maximum(ref_norm * norm, 1e-30)
    directed = ~zero
    below = np.flatnonzero(directed & (cosine < 0.9999))
    ratio = norm[directed] / ref_norm[directed]
    return {
        "lines": len(lines),
        "min_cosine": float(cosine[directed].min()) if directed.any() else float("nan"),
        "below": [(lines[i], float(cosine[i])) for i in below],
        "zero_rows": int(zero.sum()),
        "zero_rows_nonzero": [lines[i] for i in np.flatnonzero(zero & (norm > 0))],
        "norm_ratio": (float(ratio.min()), float(ratio.max())) if len(ratio) else (1.0, 1.0),
    }
