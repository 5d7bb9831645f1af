"""The data stage: where every data set comes from, and a model's corpora turned into what
training reads.

- :mod:`~psp.data.sources`: the registry of data sets, their downloads and the importers that
  write them in the mirror layout (docs/design.md §3);
- :mod:`~psp.data.corpora` and :mod:`~psp.data.sentence_files`: streaming readers of pair
  corpora in the mirror layout and of monolingual text as corpora are shipped;
- :mod:`~psp.data.filters`: the pair and sentence filters;
- :mod:`~psp.data.prepare`: one model's corpora through the filters (the clean pairs), and
  monolingual text through the sentence filters;
- :mod:`~psp.data.spm_training`: the model's SentencePiece model, trained on its clean pairs;
- :mod:`~psp.data.pairs_store`: the training pairs as piece ids in HDF5, shuffled on disk.

Nothing is imported here: each stage's script imports the one module it runs.
"""
