"""The MTEB encoder wrapper: MTEB itself runs it offline on a task built from the mirror's STS-B
and gets the Spearman correlation our own harness gets."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from psp.evaluate import StsbEvaluator
from psp.evaluate.mteb_encoder import MTEBEncoder


def test_encode_takes_sentences_or_mteb_batches(tiny_model):
    import psp

    encoder = MTEBEncoder(tiny_model)
    sentences = ["The cat sleeps.", "A cat is asleep.", "Stocks fell."]
    expected = psp.load(tiny_model).embed(sentences)
    batches = [{"text": sentences[:2]}, {"text": sentences[2:]}]
    for inputs in (sentences, batches):
        got = encoder.encode(inputs, task_metadata=None, hf_split="test", prompt_type=None)
        assert got.dtype == np.float32 and np.array_equal(got, expected)
    assert encoder.encode([]).shape == (0, 16)
    with pytest.raises(TypeError, match="not a single string"):
        encoder.encode("one string")
    pairwise = encoder.similarity_pairwise(expected[:2], expected[1:])
    full = encoder.similarity(expected, expected)
    assert full.shape == (3, 3) and np.allclose(np.diag(full), 1, atol=1e-6)
    assert np.allclose(pairwise, [full[0, 1], full[1, 2]], atol=1e-6)


@pytest.mark.skipif(importlib.util.find_spec("mteb") is None, reason="mteb not installed")
def test_mteb_runs_the_wrapper_on_the_mirrors_stsb(tiny_model, shared_data, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import mteb
    from datasets import Dataset, DatasetDict
    from mteb.models.models_protocols import EncoderProtocol
    from mteb.tasks.sts.eng.sts_benchmark_sts import STSBenchmarkSTS

    from psp.evaluate.readers import read_scored_pairs

    test = read_scored_pairs(shared_data / "sts/stsb/test.tsv")

    class MirrorSTSBenchmark(STSBenchmarkSTS):
        """MTEB's own STSBenchmark task, its data read from the mirror instead of the hub."""

        def load_data(self, **kwargs):
            columns = {"sentence1": test.sent1, "sentence2": test.sent2, "score": test.scores}
            self.dataset = {"default": DatasetDict({"test": Dataset.from_dict(columns)})}
            self.data_loaded = True

    encoder = MTEBEncoder(tiny_model)
    assert isinstance(encoder, EncoderProtocol)
    assert encoder.mteb_model_meta.name == f"psp-mine/{tiny_model.name}"
    result = mteb.evaluate(encoder, MirrorSTSBenchmark(), cache=None)
    (scores,) = result.task_results[0].scores["test"]
    ours = StsbEvaluator.from_dir(shared_data, splits=("test",))(encoder.model)
    # The same figure to the 4 decimals our tables print (float32 cosines round differently).
    assert scores["cosine_spearman"] * 100 == pytest.approx(ours["stsb_test_spearman"], abs=1e-3)
    assert scores["cosine_pearson"] * 100 == pytest.approx(ours["stsb_test_pearson"], abs=1e-3)
