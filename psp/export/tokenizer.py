"""A Hugging Face ``tokenizers`` tokenizer that gives a psp model's SentencePiece ids.

sentence-transformers' ``StaticEmbedding`` and model2vec's ``StaticModel`` tokenize with the Rust
``tokenizers`` library, not SentencePiece, so an exported model carries a ``tokenizer.json``
rebuilt from the SentencePiece model: its pieces and scores as a ``Unigram`` model (the same
Viterbi segmentation, the same unknown penalty), and before it every step :class:`PieceEncoder`
applies to the text, in the same order:

1. ``str.lower`` (when the model lowercases), the deletion of Unicode format characters and the
   fold of traditional Chinese characters into simplified ones (:func:`psp.model.text.model_text`);
2. SentencePiece's own normaliser: the character map stored in the ``.model`` (``nmt_nfkc`` for
   every model psp trains), then its whitespace rules (strip, collapse runs of spaces);
3. SentencePiece's whitespace escaping as the ``Metaspace`` pre-tokenizer (``▁``, a dummy prefix).

Where the two still differ, and why, is measured in ``docs/export.md``.
"""

from __future__ import annotations

import functools
import io
import os
import tempfile
from pathlib import Path

from psp.io import InputError
from psp.model.text import code_point_runs, deleted_characters, folded_characters

__all__ = ["SpmSettings", "build_tokenizer", "read_spm_settings"]

#: SentencePiece piece types (``sentencepiece_model.proto``).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
#: Score given to a control piece (``<s>``, ``</s>``): SentencePiece never emits one for text,
#: while a Unigram vocabulary entry would match its spelling; this score never wins.
NEVER = -1e9
META = "\u2581"


class SpmSettings:
    """What the tokenizer needs from a ``.model`` file: pieces, scores, types and the
    normaliser and trainer settings, read with SentencePiece's own protobuf schema."""

    def __init__(self, model_bytes: bytes, where: str):
        from sentencepiece import sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto()
        try:
            proto.ParseFromString(model_bytes)
        except Exception as err:  # protobuf's DecodeError has no stable import path
            raise InputError(f"{where}: not a SentencePiece model: {err}") from err
        self.where = where
        self.pieces = [(p.piece, p.score, p.type) for p in proto.pieces]
        self.normalizer = proto.normalizer_spec
        self.trainer = proto.trainer_spec
        self.unk_id = next((i for i, p in enumerate(self.pieces) if p[2] == UNKNOWN), None)
        self._check()

    def _check(self) -> None:
        """Refuse what the rebuilt tokenizer cannot reproduce, naming the file."""
        problems = []
        if self.trainer.model_type != 1:  # UNIGRAM
            problems.append("model type is not unigram")
        if any(kind == USER_DEFINED for _, _, kind in self.pieces):
            problems.append("user-defined pieces (matched before segmentation)")
        if self.trainer.treat_whitespace_as_suffix or not self.normalizer.escape_whitespaces:
            problems.append("whitespace as suffix, or unescaped whitespace")
        if self.unk_id is None:
            problems.append("no <unk> piece")
        if problems:
            raise InputError(f"{self.where}: cannot export this tokenizer: {'; '.join(problems)}")


def read_spm_settings(model: str | os.PathLike | bytes) -> SpmSettings:
    """:class:`SpmSettings` of a ``.model`` file (or its bytes)."""
    if isinstance(model, bytes | bytearray):
        return SpmSettings(bytes(model), "<sentencepiece model bytes>")
    return SpmSettings(Path(model).read_bytes(), str(model))


def _code_point_class(code_points: list[int]) -> str:
    """An Oniguruma character class matching exactly ``code_points`` (sorted), as ranges."""
    runs = code_point_runs(code_points)
    parts = [f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in runs]
    return "[" + "".join(parts) + "]"


@functools.cache
def folding_charsmap() -> bytes:
    """:func:`folded_characters` as a SentencePiece precompiled character map, which
    ``tokenizers``' ``Precompiled`` normaliser applies in one pass (one ``Replace`` per character
    would be 4,353 passes).

    SentencePiece compiles the map itself: a model trained on a few letters with the fold as its
    only normalisation rule (``normalization_rule_tsv``) carries it, 10 ms.
    """
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2

    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp, "fold.tsv")
        rules.write_text("".join(f"{a:X}\t{b:X}\n" for a, b in folded_characters().items()))
        model = io.BytesIO()
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(["a b c d"] * 4),
            model_writer=model,
            model_type="char",
            vocab_size=8,
            hard_vocab_limit=False,
            normalization_rule_tsv=str(rules),
            add_dummy_prefix=False,
            remove_extra_whitespaces=False,
            minloglevel=2,
        )
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.getvalue())
    return proto.normalizer_spec.precompiled_charsmap


def _normalizer(settings: SpmSettings, lowercase: bool):
    from tokenizers import Regex, normalizers

    steps = [normalizers.Lowercase()] if lowercase else []
    steps.append(normalizers.Replace(Regex(_code_point_class(deleted_characters())), ""))
    steps.append(normalizers.Precompiled(folding_charsmap()))
    if settings.normalizer.precompiled_charsmap:
        steps.append(normalizers.Precompiled(settings.normalizer.precompiled_charsmap))
    if settings.normalizer.remove_extra_whitespaces:
        # SentencePiece strips and collapses the ASCII space only (its map has turned other
        # whitespace into it); tokenizers' Strip would remove every Unicode whitespace.
        steps.append(normalizers.Replace(Regex("^ +| +$"), ""))
        steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    return normalizers.Sequence(steps)


def build_tokenizer(model: str | os.PathLike | bytes, *, lowercase: bool):
    """A ``tokenizers.Tokenizer`` giving the ids SentencePiece gives on ``model_text`` text.

    Ids are SentencePiece's, so row ``i`` of a psp table is token ``i``. No special tokens, no
    padding, no truncation: a library's encode sees every piece, as ``psp embed`` does.
    """
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import Unigram

    settings = read_spm_settings(model)
    vocab = [(piece, NEVER if kind == CONTROL else score) for piece, score, kind in settings.pieces]
    tokenizer = Tokenizer(
        Unigram(vocab, unk_id=settings.unk_id, byte_fallback=settings.trainer.byte_fallback)
    )
    tokenizer.normalizer = _normalizer(settings, lowercase)
    prepend = "always" if settings.normalizer.add_dummy_prefix else "never"
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement=META, prepend_scheme=prepend, split=settings.trainer.split_by_whitespace
    )
    tokenizer.decoder = decoders.Metaspace(replacement=META, prepend_scheme=prepend)
    return tokenizer
