"""The model: a sentence is the mean of its SentencePiece piece embeddings (P-SP).

- :mod:`~psp.model.text`: the text a model sees (lowercased, format characters deleted), as
  strings and, compiled, as UTF-8 bytes;
- :mod:`~psp.model.piece_encoder`: sentences to piece ids, the one tokenisation path, with
  :mod:`~psp.model.word_pieces`, its exact cache of whole words;
- :mod:`~psp.model.directory`: the model directory on disk (``config.json``,
  ``sentencepiece.model``, ``embeddings.safetensors``), read and written without torch;
- :mod:`~psp.model.pooling`: sentence vectors from a piece table without torch
  (:class:`~psp.model.pooling.TableModel`, mean pooling, cosines);
- :mod:`~psp.model.torch_model`: :class:`~psp.model.torch_model.PSPModel`, the trainable torch
  form, and the :func:`~psp.model.torch_model.load` behind :func:`psp.load`;
- :mod:`~psp.model.original`: the authors' released checkpoints, imported as a model directory.

Nothing is imported here, so that the torch-free modules stay torch-free (``psp embed`` never
loads torch): import each module by its name.
"""
