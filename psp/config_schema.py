"""The one declaration of every config key: the JSON Schema ``psp/config.schema.yaml``, and the
one check that a mapping read from a file holds only the fields of its dataclass.

Each key's type, range, default and description is written once, in the schema the workflow
validates its config against when the Snakefile is parsed. The library reads the same file:
:func:`config_class` turns an annotated class into a dataclass whose defaults and value checks
come from schema keys, and the ``psp`` commands make one flag per key from them
(:func:`psp.cli.options.add_key_flags`). The class is checked against the schema when it is
built, at import: a field the schema does not declare, a schema key without a field, an
annotation of another type or a default written in both places is a ``TypeError`` there, so the
schema, the dataclasses and the flags cannot drift apart.

Keys that only the library and the ``psp`` command take (the workflow derives them from a rule's
threads or a model's languages) are declared in the same file under ``definitions.*_library``.

Training, filter, mining and model configs are dataclasses filled from user-written files. An
unknown key there is a typo or a newer format; ignoring it would run with a default the user
meant to change, so every loader refuses it the same way (:func:`reject_unknown_keys`), naming
the key and the known ones.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

SCHEMA_FILE = Path(__file__).with_name("config.schema.yaml")
#: The Python type of each JSON type a config key may take.
PYTHON_TYPES = {"integer": int, "number": float, "boolean": bool, "string": str, "array": tuple}
NO_DEFAULT: Any = object()  # a key without a default (None is a default)


@functools.cache
def schema() -> dict:
    """The parsed schema file (read once; yaml is imported here, so that a model directory,
    which only needs :func:`reject_unknown_keys`, loads without it)."""
    import yaml

    return yaml.safe_load(SCHEMA_FILE.read_text(encoding="utf-8"))


def _node(pointer: str) -> dict:
    """The schema object at a JSON pointer such as ``#/definitions/train``."""
    node = schema()
    for part in pointer.removeprefix("#/").split("/"):
        node = node[part]
    return node


@dataclasses.dataclass(frozen=True)
class Key:
    """What one config key accepts, read from its schema property.

    ``kind`` is its JSON type besides ``null`` (``nullable``); numbers lie between ``minimum``
    and ``maximum``, each bound excluded when ``*_open``; ``choices`` is the ``enum`` of a string
    that names an option, or match ``pattern``; an array holds ``min_items`` to ``max_items``
    strings. NaN never fits; an infinite number fits only a number key without bounds (a
    threshold of ``-inf`` keeps every candidate).
    """

    name: str
    kind: str
    description: str
    nullable: bool = False
    default: Any = NO_DEFAULT
    minimum: float | None = None
    maximum: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    pattern: str | None = None
    min_items: int = 0
    max_items: int | None = None

    @classmethod
    def from_schema(cls, name: str, prop: Mapping) -> Key:
        kinds = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        (kind,) = [k for k in kinds if k != "null"]
        if kind not in PYTHON_TYPES:
            raise TypeError(f"{SCHEMA_FILE.name}: key {name}: no config field takes {kind!r}")
        low_open, high_open = "exclusiveMinimum" in prop, "exclusiveMaximum" in prop
        return cls(
            name=name,
            kind=kind,
            description=prop.get("description", ""),
            nullable="null" in kinds,
            default=prop.get("default", NO_DEFAULT),
            minimum=prop.get("exclusiveMinimum" if low_open else "minimum"),
            maximum=prop.get("exclusiveMaximum" if high_open else "maximum"),
            low_open=low_open,
            high_open=high_open,
            choices=tuple(prop.get("enum", ())),
            pattern=prop.get("pattern"),
            min_items=prop.get("minItems", 0),
            max_items=prop.get("maxItems"),
        )

    @property
    def python_type(self) -> type:
        return PYTHON_TYPES[self.kind]

    def describe(self) -> str:
        """The accepted values in words, for error messages and flag help."""
        if self.kind == "boolean":
            text = "true or false"
        elif self.choices:
            text = f"one of {', '.join(self.choices)}"
        elif self.kind == "string":
            text = "a string" + (f" matching {self.pattern}" if self.pattern else "")
        elif self.kind == "array":
            text = "a list of strings"
            if self.max_items is not None:
                text = f"a list of {self.min_items} to {self.max_items} strings"
        elif self.minimum is not None and self.maximum is not None:
            text = (
                f"a number in {'(' if self.low_open else '['}{self.minimum:g}, "
                f"{self.maximum:g}{')' if self.high_open else ']'}"
            )
        elif self.kind == "integer":
            text = "a whole number"
            if self.minimum is not None:
                text += f" {'>' if self.low_open else '>='} {self.minimum:g}"
        elif self.minimum is not None:
            text = f"a finite number {'>' if self.low_open else '>='} {self.minimum:g}"
        else:
            text = "a number (not NaN)"
        return text + (" or none" if self.nullable else "")

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        if self.choices:
            return isinstance(value, str) and value in self.choices
        if self.kind == "string":
            return isinstance(value, str) and (
                self.pattern is None or re.search(self.pattern, value) is not None
            )
        if self.kind == "boolean":
            return isinstance(value, bool)
        if self.kind == "array":
            return (
                isinstance(value, (list, tuple))
                and all(isinstance(item, str) for item in value)
                and self.min_items <= len(value) <= (self.max_items or len(value))
            )
        return self._number_in_range(value)

    def _number_in_range(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(
            value, (int, float) if self.kind == "number" else int
        ):
            return False
        if math.isnan(value):
            return False
        if math.isinf(value):  # only where no bound is declared: a threshold of -inf keeps all
            return self.kind == "number" and self.minimum is None and self.maximum is None
        if self.minimum is not None and (
            value <= self.minimum if self.low_open else value < self.minimum
        ):
            return False
        return self.maximum is None or (
            value < self.maximum if self.high_open else value <= self.maximum
        )

    def check(self, value: Any) -> None:
        """``ValueError`` ``"<name>: expected <what>, got <value>"`` unless ``value`` fits."""
        if not self.accepts(value):
            raise ValueError(f"{self.name}: expected {self.describe()}, got {value!r}")

    def parse(self, text: str) -> Any:
        """The value of a command-line string; ``ValueError`` with the expected form."""
        value: Any = text
        if self.nullable and text.lower() in ("none", "null"):
            value = None
        elif self.kind in ("integer", "number"):
            try:
                value = self.python_type(text)
            except ValueError:
                value = text
        if not self.accepts(value):
            raise ValueError(f"expected {self.describe()}, got {text!r}")
        return value


def keys_at(pointer: str) -> dict[str, Key]:
    """The keys of the schema object at ``pointer`` (e.g. ``#/definitions/train``), in order."""
    return {
        name: Key.from_schema(name, prop)
        for name, prop in _node(pointer)["properties"].items()
        if "type" in prop
    }


def _annotation_fits(hint: Any, key: Key) -> bool:
    """Whether a field's resolved annotation is the Python form of the key's JSON type."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    core = [arg for arg in args if arg is not type(None)]
    if len(core) != 1 or (len(core) < len(args)) != key.nullable:
        return False
    (core,) = core
    if key.choices and typing.get_origin(core) is Literal:
        return set(typing.get_args(core)) == set(key.choices)
    if key.kind == "array":
        return typing.get_origin(core) is tuple
    return core is key.python_type


def config_class(
    *pointers: str,
    rename: Mapping[str, str] | None = None,
    exclude: tuple[str, ...] = (),
    defaults: Mapping[str, Any] | None = None,
    frozen: bool = False,
):
    """Make a config dataclass of the schema objects at ``pointers``.

    Every annotated name of the class is a field. A field whose value in the class body is a
    ``dataclasses.field(...)`` is structure (a nested config), not a key; every other field is
    the schema key of its name (or ``rename[field]``), takes the key's default and is checked
    against it in ``__post_init__``, which then calls the class's own ``_check()`` for what the
    schema cannot express (relations between keys). A field's default is written in the class
    body only where the schema has none (filter keys, whose workflow default is a preset), and
    ``defaults`` gives a library default that differs from the workflow's, with the reason at
    the call. Keys of the objects that the class does not take are listed in ``exclude``.

    Raises:
        TypeError: at import, where the class and the schema disagree.
    """
    rename, defaults = dict(rename or {}), dict(defaults or {})

    def build(cls: type) -> type:
        where = f"{cls.__name__} ({SCHEMA_FILE.name} {', '.join(pointers)})"
        declared: dict[str, Key] = {}
        for pointer in pointers:
            declared |= keys_at(pointer)
        hints = typing.get_type_hints(cls)
        keys: dict[str, Key] = {}
        annotations = cls.__dict__.get("__annotations__", {})
        for name in annotations:
            body = cls.__dict__.get(name, NO_DEFAULT)
            if isinstance(body, dataclasses.Field):
                continue
            key = declared.get(rename.get(name, name))
            if key is None:
                raise TypeError(f"{where}: field {name} is not a declared key")
            if not _annotation_fits(hints[name], key):
                raise TypeError(
                    f"{where}: {name}: {annotations[name]} does not fit {key.describe()}"
                )
            default = defaults.get(name, key.default)
            if default is not NO_DEFAULT and body is not NO_DEFAULT:
                raise TypeError(f"{where}: {name}: default in both the class and the schema")
            if default is not NO_DEFAULT:
                key.check(default)
                setattr(cls, name, default)
            keys[name] = dataclasses.replace(key, name=name)
        unused = set(declared) - {rename.get(name, name) for name in keys} - set(exclude)
        if unused:
            raise TypeError(f"{where}: no field for key(s) {sorted(unused)}")
        cls.__post_init__ = _post_init
        cls.config_keys = keys
        return dataclasses.dataclass(frozen=frozen)(cls)

    return build


def _post_init(self) -> None:
    for name, key in self.config_keys.items():
        key.check(getattr(self, name))
    check = getattr(self, "_check", None)
    if check is not None:
        check()


def config_keys(cls: type) -> dict[str, Key]:
    """``{field: Key}`` of a :func:`config_class`, in declaration order."""
    return cls.config_keys


def reject_unknown_keys(
    values: Mapping, cls: type, what: str, error: type[Exception] = ValueError
) -> None:
    """Raise ``error`` naming the keys of ``values`` that are not fields of dataclass ``cls``.

    Args:
        values: the mapping about to become ``cls(**values)``.
        cls: the dataclass whose field names are the known keys.
        what: what is being read, e.g. ``"training config"`` or ``"results/m/config.json"``.
        error: exception type (loaders of files use :class:`psp.io.InputError`).
    """
    known = sorted(field.name for field in dataclasses.fields(cls))
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise error(f"{what}: unknown key(s) {unknown}; known: {known}")


def from_mapping(cls: type, values: Mapping, what: str) -> Any:
    """``cls(**values)`` for a mapping read from a file or flags; an unknown key or a value out
    of range is a ``ValueError`` naming it, prefixed with ``what`` (the file, or the section)."""
    reject_unknown_keys(values, cls, what)
    try:
        return cls(**values)
    except ValueError as err:
        raise ValueError(f"{what}: {err}") from None
