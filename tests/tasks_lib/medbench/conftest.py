"""Fixtures of the MedBench tests: a private storage root per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks_lib.settings import reset_settings


@pytest.fixture
def private_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``MEDFLOWS_STORAGE_URL`` pointed at a fresh folder for this test."""
    root = tmp_path / "storage"
    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(root))
    reset_settings()
    yield root
    reset_settings()
