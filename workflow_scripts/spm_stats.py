"""Rule spm_stats: what a model's SentencePiece model drops of held-out text, per language."""

import json
from pathlib import Path

from psp.data.corpora import iter_pairs
from psp.data.spm_training import spm_settings
from psp.io import atomic_open
from psp.model.piece_encoder import PieceEncoder
from psp.workflow import jobs
from psp.workflow.runtime import setup

setup(snakemake)
languages = snakemake.params.languages
heldout = snakemake.params.heldout
settings = spm_settings(snakemake.params.spm, languages)
encoder = PieceEncoder(snakemake.input.model)

# Distinct sentences per language: a bitext corpus gives its source side to the first language
# and its English side to the second; a paraphrase corpus (English) gives both to "en".
sentences = {lang: {} for lang in languages}
corpora = {lang: [] for lang in languages}
if heldout:
    root = jobs.staged_root(snakemake.input.heldout, jobs.refs_files(Path(), heldout, languages))
    for corpus in heldout:
        for lang in dict.fromkeys(languages):
            corpora[lang].append(corpus)
        for pair in iter_pairs(root, corpus, languages):
            for lang, text in zip(languages, (pair.src, pair.tgt), strict=True):
                if text is not None:
                    sentences[lang][text] = None

stats = {
    "model": snakemake.wildcards.model,
    "vocab_size": encoder.vocab_size,
    "settings": settings,
    "heldout": {
        lang: {"corpora": corpora[lang], **encoder.unknown_stats(list(sentences[lang]))}
        for lang in sentences
        if sentences[lang]
    },
}
with atomic_open(snakemake.output.stats) as handle:
    json.dump(stats, handle, ensure_ascii=False, indent=1)
    handle.write("\n")
