"""A storage root and ledger of a test module's own.

Tests share one storage root and one ledger (tests/conftest.py). A module whose assertions depend
on what the ledger holds for a pool (its audit record, its published versions) takes its own, so
an earlier module that published the same content cannot change its outcome.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def own_storage_and_ledger(root: Path) -> Iterator[pytest.MonkeyPatch]:
    """Point settings at ``root/storage`` and ``root/ledger.db`` while the block runs; yields the
    monkeypatch so the caller can patch more for the same span."""
    from tasks_lib.settings import reset_settings

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEDFLOWS_STORAGE_URL", str(root / "storage"))
        mp.setenv("MEDFLOWS_LEDGER_URL", f"sqlite:///{root / 'ledger.db'}")
        reset_settings()
        try:
            yield mp
        finally:
            reset_settings()
