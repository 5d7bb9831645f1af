"""The one check that a mapping read from YAML/JSON only holds the fields of a dataclass.

Training, filter, mining and model configs are dataclasses filled from user-written files. An
unknown key there is a typo or a newer format; ignoring it would run with a default the user
meant to change, so every loader refuses it the same way, naming the key and the known ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


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
