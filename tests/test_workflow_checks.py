"""Cross-key config checks (psp.workflow.checks.check_references) on the default config."""

from __future__ import annotations

import pytest
import yaml

from psp.workflow.checks import check_references
from psp.workflow.jobs import ConfigError

from .workflow.conftest import REPO


@pytest.fixture
def config() -> dict:
    return yaml.safe_load((REPO / "config.yaml").read_text())


def test_default_config_passes(config):
    check_references(config)


def test_paraphrase_model_with_bitext_needs_the_language_filter_off(config):
    en = config["models"]["en"]
    en["corpora"] = ["paraphrase/parasci/acl-train", "bitext/es-en/wmt-newstest"]
    en["filters"]["langid"] = True
    with pytest.raises(
        ConfigError, match=r"models\.en\.filters\.langid: bitext/es-en/wmt-newstest"
    ):
        check_references(config)
    del en["filters"]["langid"]  # the paraphrase preset checks languages too
    with pytest.raises(ConfigError, match="set langid: false"):
        check_references(config)
    en["filters"]["langid"] = False
    check_references(config)


def test_bitext_model_is_named_after_its_languages(config):
    config["models"]["es_en"] = config["models"].pop("es-en")
    with pytest.raises(ConfigError, match=r"models\.es_en: a bitext model is named after"):
        check_references(config)


def test_compared_models_must_be_configured(config):
    config["compare_losses"] = {"models": ["es-en", "pt-en"]}
    with pytest.raises(ConfigError, match=r"compare_losses\.models: unknown model 'pt-en'"):
        check_references(config)


def test_bucc2018_tasks_are_sample_then_training_without_distractors(config):
    from psp.workflow.jobs import mirror_files

    config["bucc"]["de-en"] = {
        "model": "de-en",
        "dev": "bucc2018/de-en/de-en.sample",
        "test": "bucc2018/de-en/de-en.training",
    }
    check_references(config)
    assert [p.name for p in mirror_files(REPO, "bucc2018/de-en/de-en.sample", ["de", "en"])] == [
        "de-en.sample.de",
        "de-en.sample.en",
        "de-en.sample.gold",
    ]
    config["bucc"]["de-en"]["dev"] = "bucc2018/de-en/de-en.training"
    with pytest.raises(ConfigError, match=r"bucc\.de-en: BUCC 2018 tunes on the sample split"):
        check_references(config)
    config["bucc"]["de-en"]["dev"] = "bucc2018/de-en/de-en.sample"
    config["bucc"]["de-en"]["distractors"] = {"src": ["mono/en/wmt-newstest-en"], "tgt": []}
    with pytest.raises(ConfigError, match=r"bucc\.de-en\.distractors: BUCC 2018 brings its own"):
        check_references(config)
    del config["bucc"]["de-en"]["distractors"]
    config["bucc"]["es-en"]["distractors"] = {"src": [], "tgt": []}
    with pytest.raises(ConfigError, match=r"bucc\.es-en\.distractors: a task built from"):
        check_references(config)
