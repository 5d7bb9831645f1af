"""Argument types that check a value before any work starts.

A bad value must stop the command with argparse's usage error naming the option, not train with
a negative learning rate, keep nothing at a NaN threshold, or surface as a traceback from torch
minutes later. Each type is a plain function of the option's string, for ``type=``.
"""

from __future__ import annotations

import argparse
import math
import os

STDIN = "-"


def _number(text: str, kind: type, what: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """A whole number >= 1 (counts, sizes, threads)."""
    value = _number(text, int, "a whole number >= 1")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (retries, seeds)."""
    value = _number(text, int, "a whole number >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rates, timeouts)."""
    value = _number(text, float, "a finite number > 0")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def key_type(key):
    """An argparse ``type`` that parses and range-checks one config key
    (:class:`psp.config_schema.Key`)."""

    def parse(text: str):
        try:
            return key.parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = key.python_type.__name__  # argparse names the type in its messages
    return parse


def add_key_flags(group, keys: dict, defaults: dict, flags: dict | None = None) -> None:
    """One ``--flag`` per config key, its help and range from the key's schema declaration.

    A flag not given leaves no attribute (``argparse.SUPPRESS``), so the value of a config file,
    or the default, stays; ``defaults`` only shows in the help.

    Args:
        group: parser or argument group.
        keys: ``{field: Key}`` of a :func:`psp.config_schema.config_class`.
        defaults: the value each field takes when its flag is not given.
        flags: the flag of a field whose flag is not ``--`` plus its name with dashes.
    """
    for field, key in keys.items():
        flag = (flags or {}).get(field, "--" + field.replace("_", "-"))
        default = defaults[field]
        text = f"{key.description} (default: {'none' if default is None else default})"
        text = text.replace("%", "%%")  # argparse formats help with %
        if key.kind == "boolean":
            group.add_argument(
                flag,
                dest=field,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=text,
            )
        else:
            group.add_argument(
                flag,
                dest=field,
                type=key_type(key),
                default=argparse.SUPPRESS,
                metavar=flag.removeprefix("--").replace("-", "_").upper(),
                help=text,
            )


def input_file(text: str) -> str:
    """An existing readable file (not a directory)."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text}: is a directory, not a file")
    if not os.access(text, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: not readable")
    return text


def input_file_or_stdin(text: str) -> str:
    """:func:`input_file`, or ``-`` for standard input."""
    return text if text == STDIN else input_file(text)


def model_files(directory: str | os.PathLike | None, label: str) -> dict[str, str]:
    """The files a model directory is loaded from, each labelled ``LABEL FILE`` (for
    :class:`psp.io.FileRoles`): an output must not replace one of them."""
    from psp.model.directory import MODEL_FILES

    if directory is None:
        return {}
    return {f"{label} {name}": os.path.join(directory, name) for name in MODEL_FILES}


def model_stream_roles(args: argparse.Namespace):
    """``psp embed`` and ``psp score`` read ``--input`` and the model, and write ``--output``."""
    from psp.io import FileRoles

    return FileRoles(
        outputs={"--output": args.output},
        inputs={"--input": args.input, **model_files(args.model, "--model")},
    )


def add_model_stream_arguments(
    parser, *, input_help: str, output_help: str, batch_help: str
) -> None:
    """The flags ``psp embed`` and ``psp score`` share: ``--model``, ``--input``, ``--output``,
    ``--batch-size`` and ``--threads``, with the command's own help for the data flags, and
    what they read and write (:func:`model_stream_roles`)."""
    parser.set_defaults(file_roles=model_stream_roles)
    parser.add_argument("--model", required=True, help="model directory")
    parser.add_argument("--input", required=True, type=input_file_or_stdin, help=input_help)
    parser.add_argument("--output", required=True, help=output_help)
    parser.add_argument("--batch-size", type=positive_int, default=8192, help=batch_help)
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads (default: all this process may use)",
    )
