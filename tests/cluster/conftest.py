"""The cluster test mines the same slice of the data mirror as the workflow tests."""

from __future__ import annotations

from ..workflow.conftest import mirror_slice  # noqa: F401 (a fixture, used by name)
