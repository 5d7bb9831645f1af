"""Cross-key config checks (psp.workflow_config.check_references) on the default config."""

from __future__ import annotations

import pytest
import yaml

from psp.workflow_config import ConfigError, check_references

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
