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


@pytest.fixture
def allow_loopback_endpoints(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The operator opens 127.0.0.1 to registered endpoints (the local OpenAI-compatible test
    server); without it such an ``api_base`` is refused."""
    monkeypatch.setenv("MEDFLOWS_ENDPOINT_ALLOW_NETWORKS", "127.0.0.1/32")
    reset_settings()
    yield
    reset_settings()
