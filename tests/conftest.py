"""Shared fixtures: where the real data mirror lives, and small helpers every test file uses."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    """The local data mirror: ``$PSP_SHARED_DATA`` or ``../shared/data`` beside the repository."""
    candidates = [os.environ.get("PSP_SHARED_DATA"), REPO.parent / "shared" / "data"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "SOURCES.md").exists():
            return Path(candidate).resolve()
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data mirror; tests that need it skip cleanly where it is absent."""
    path = shared_data_dir()
    if path is None:
        pytest.skip("shared data mirror not found (set PSP_SHARED_DATA)")
    return path


@pytest.fixture(scope="session")
def news(shared_data) -> list[str]:
    """The first 3,000 English news sentences of the mirror (real text for small models)."""
    with gzip.open(shared_data / "mono" / "en" / "wmt-newstest-en.txt.gz", "rt") as handle:
        return [next(handle).rstrip("\n") for _ in range(3000)]


@pytest.fixture(scope="session")
def spm_path(news, tmp_path_factory) -> Path:
    """A 500-piece SentencePiece model trained on :func:`news`, shared by the model tests."""
    from psp.data.spm_training import train_spm

    return train_spm(news, tmp_path_factory.mktemp("spm") / "en.model", vocab_size=500)


@pytest.fixture(scope="session")
def tiny_model(spm_path, tmp_path_factory) -> Path:
    """An untrained es-en model directory (dim 16) over :func:`spm_path`: real files, loads fast."""
    from psp.model.torch_model import PSPModel

    model = PSPModel.from_spm(spm_path, dim=16, languages=["es", "en"])
    return model.save(tmp_path_factory.mktemp("model") / "es-en")
