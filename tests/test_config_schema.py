"""Config classes and flags made from the one declaration, psp/config.schema.yaml: a class that
disagrees with the schema cannot be built, and ``psp mine`` takes one flag per mining key."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import yaml

from psp.cli import build_parser
from psp.config_schema import SCHEMA_FILE, config_class, config_keys, keys_at, schema
from psp.data.filters.config import FilterConfig
from psp.mine.config import IndexConfig, MineConfig
from psp.train import TrainConfig

TRAIN = "#/definitions/train"


def test_schema_defaults_are_the_dataclass_defaults():
    """The schema is read, not copied: its file's defaults are the fields' defaults."""
    schema = yaml.safe_load(SCHEMA_FILE.read_text())
    train = schema["definitions"]["train"]["properties"]
    assert {key: prop["default"] for key, prop in train.items()} == {
        key: getattr(TrainConfig(), key) for key in train
    }
    mining = schema["properties"]["mining"]["additionalProperties"]["properties"]
    assert MineConfig().n_shards == mining["shards"]["default"]
    assert IndexConfig().nprobe == mining["nprobe"]["default"]


def test_a_field_the_schema_does_not_declare_stops_the_import():
    with pytest.raises(TypeError, match="field dimm is not a declared key"):

        @config_class("#/definitions/train_library")
        class Typo:
            threads: int | None
            dimm: int


def test_a_schema_key_without_a_field_stops_the_import():
    with pytest.raises(TypeError, match=r"no field for key\(s\) \['threads'\]"):

        @config_class("#/definitions/train_library")
        class Missing:
            pass


def test_an_annotation_of_another_type_stops_the_import():
    with pytest.raises(TypeError, match="threads: int does not fit a whole number >= 1 or none"):

        @config_class("#/definitions/train_library")
        class NotNullable:
            threads: int


def test_a_default_written_twice_stops_the_import():
    with pytest.raises(TypeError, match="threads: default in both the class and the schema"):

        @config_class("#/definitions/train_library")
        class Twice:
            threads: int | None = 4


def test_every_key_is_checked_where_the_value_comes_from():
    with pytest.raises(ValueError, match=r"^langid_threshold: expected a number in \[0, 1\]"):
        FilterConfig(languages=("es", "en"), langid_threshold=1.5)
    with pytest.raises(ValueError, match="^languages: expected a list of 1 to 2 strings"):
        FilterConfig(languages=("es", "en", "fr"))
    with pytest.raises(ValueError, match="^MineConfig: n_shards: expected a whole number >= 1"):
        MineConfig.from_dict({"n_shards": 0})
    with pytest.raises(ValueError, match=r"^threshold: expected a number \(not NaN\) or none"):
        MineConfig(threshold=math.nan)
    assert MineConfig(threshold=-math.inf).effective_threshold == -math.inf  # keeps everything
    with pytest.raises(ValueError, match="^lr: expected a finite number > 0"):
        TrainConfig(lr=math.inf)


def test_the_workflow_and_the_library_differ_only_where_declared():
    """The workflow's threshold may be ``auto`` (resolved to a number by the rules); the
    library's is a number or none, none following the margin."""
    workflow = schema()["properties"]["mining"]["additionalProperties"]["properties"]
    assert workflow["threshold"]["default"] == "auto"
    assert "threshold" not in keys_at("#/properties/mining/additionalProperties")
    assert keys_at("#/definitions/mine_library")["threshold"].default is None
    assert MineConfig().threshold is None and MineConfig().effective_threshold == 1.06


def _mine_args(*flags: str):
    base = ["mine", "--model", "m", "--src-file", __file__, "--tgt-file", __file__, "--output", "o"]
    return build_parser("mine").parse_args([*base, *flags])


def test_psp_mine_has_one_flag_per_mining_key():
    parser = build_parser("mine")
    mine = parser._subparsers._group_actions[0].choices["mine"]
    dests = {action.dest for action in mine._actions}
    assert set(config_keys(MineConfig)) | set(config_keys(IndexConfig)) <= dests
    from psp.cli.mine import build_config

    cfg = build_config(_mine_args())
    # no flag: the library's defaults, with the workflow's index settings (exact below them)
    assert cfg == MineConfig(index=IndexConfig())
    cfg = build_config(_mine_args("--shards", "3", "--no-float16", "--threshold=-inf"))
    assert (cfg.n_shards, cfg.float16, cfg.threshold) == (3, False, -math.inf)
    cfg = build_config(_mine_args("--ivf-min-size", "10", "--nprobe", "2", "--nlist", "none"))
    assert cfg.index == dataclasses.replace(IndexConfig(), ivf_min_size=10, nprobe=2)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--k", "0", "expected a whole number >= 1, got '0'"),
        ("--margin", "cosine", "expected one of ratio, distance, absolute, got 'cosine'"),
        ("--threshold", "nan", r"expected a number \(not NaN\) or none, got 'nan'"),
        ("--train-iters", "0", "expected a whole number >= 1, got '0'"),
    ],
)
def test_bad_mine_flags_stop_with_a_usage_error(flag, value, message, capsys):
    with pytest.raises(SystemExit):
        _mine_args(flag, value)
    assert re.search(f"argument {flag}: {message}", capsys.readouterr().err)
