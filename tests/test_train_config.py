"""Training keys: range checks wherever a value comes from and one ``psp train`` flag per key
with the config's default (both made from the schema, tests/test_config_schema.py)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from psp.cli import build_parser
from psp.config_schema import SCHEMA_FILE as SCHEMA
from psp.train import TrainConfig


def test_unknown_config_key_is_named():
    with pytest.raises(ValueError, match="megabatch_sise"):
        TrainConfig.from_dict({"dim": 8, "megabatch_sise": 3})
    assert TrainConfig.from_dict({"dim": 8}).dim == 8


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("dim", 0, "a whole number >= 1"),
        ("dim", 2.5, "a whole number >= 1"),
        ("batch_size", 1, "a whole number >= 2"),
        ("lr", 0, "a finite number > 0"),
        ("lr", float("nan"), "a finite number > 0"),
        ("margin", -0.1, "a finite number >= 0"),
        ("dropout", 1.0, r"a number in \[0, 1\)"),
        ("grad_clip", 0, "a finite number > 0 or none"),
        ("seed", -1, "a whole number >= 0"),
        ("select_best", "yes", "true or false"),
        ("epochs", True, "a whole number >= 1"),
        ("device", 0, "a string"),
        ("loss", "hinge", "one of margin, pair_weighting"),
        ("pw_lambda", 1.0, r"a number in \[-1, 1\)"),
        ("pw_beta", 0, "a finite number > 0"),
        ("pw_negatives", "same_side", "one of both, other_side"),
    ],
)
def test_out_of_range_values_are_refused_naming_key_and_source(key, value, expected):
    with pytest.raises(ValueError, match=rf"^train\.yaml: {key}: expected {expected}, got"):
        TrainConfig.from_dict({key: value}, "train.yaml")


def test_nullable_keys_take_none_and_numbers_take_whole_floats():
    cfg = TrainConfig.from_dict({"grad_clip": None, "max_pieces": None, "lr": 1})
    assert cfg.grad_clip is None and cfg.lr == 1


def test_every_key_has_a_flag_with_the_config_default():
    parser = build_parser("train")
    train = parser._subparsers._group_actions[0].choices["train"]
    flags = {a.dest: a for a in train._actions}
    for field in dataclasses.fields(TrainConfig):
        action = flags[field.name]
        assert "--" + field.name.replace("_", "-") in action.option_strings
        shown = "none" if field.default is None else str(field.default)
        assert f"(default: {shown})" in action.help
    base = ["train", "--h5", __file__, "--spm", __file__, "--model-dir", "m", "--work-dir", "w"]
    args = parser.parse_args([*base, "--grad-clip", "none", "--no-select-best", "--anneal", "7"])
    assert (args.grad_clip, args.select_best, args.anneal) == (None, False, 7)
    args = parser.parse_args([*base, "--loss", "pair_weighting", "--pw-lambda", "-0.2"])
    assert (args.loss, args.pw_lambda) == ("pair_weighting", -0.2)
    assert not hasattr(args, "margin")  # not given: the config file's value stays


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--anneal", "0", "expected a whole number >= 1, got '0'"),
        ("--margin", "x", "expected a finite number >= 0, got 'x'"),
        ("--loss", "hinge", "expected one of margin, pair_weighting, got 'hinge'"),
    ],
)
def test_bad_flag_values_stop_with_a_usage_error(flag, value, message, capsys):
    parser = build_parser("train")
    base = ["train", "--h5", __file__, "--spm", __file__, "--model-dir", "m", "--work-dir", "w"]
    with pytest.raises(SystemExit):
        parser.parse_args([*base, flag, value])
    assert f"argument {flag}: {message}" in capsys.readouterr().err


def test_compare_losses_overrides_only_the_objective_keys():
    schema = yaml.safe_load(SCHEMA.read_text())["properties"]["compare_losses"]
    keys = set(schema["properties"]["train"]["propertyNames"]["enum"])
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert keys == {"loss", "margin"} | {name for name in fields if name.startswith("pw_")}
