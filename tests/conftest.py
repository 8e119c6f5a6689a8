"""Test-wide setup: isolated settings, one Prefect test harness per session.

Environment variables are set before any medflows module is imported, so settings, step result
storage and the ledger all point into a temporary folder.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import DATA_ROOT

_TMP = Path(tempfile.mkdtemp(prefix="medflows-tests-"))
os.environ.update({
    "MEDFLOWS_STORAGE_URL": str(_TMP / "storage"),
    "MEDFLOWS_LEDGER_URL": f"sqlite:///{_TMP / 'ledger.db'}",
    "MEDFLOWS_RESULTS_DIR": str(_TMP / "results"),
    "PREFECT_HOME": str(_TMP / "prefect-home"),
    "MEDFLOWS_SERVICES_DIR": str(_TMP / "services"),
    "MEDFLOWS_AGENT_ENV_DIR": str(_TMP / "agent-envs"),
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "GX_ANALYTICS_ENABLED": "false",
    # The call cache is on by default for users; tests share one storage root, so a scripted
    # fake model in one test must not be answered from another test's replies. Tests of the
    # cache switch it on for their own private root.
    "MEDFLOWS_LLM_CACHE": "false",
    # No provider is reachable: judges (S1–S3, the construct flows' audit) use the offline judge.
    "MEDFLOWS_JUDGE_MODEL": "rules",
})
os.environ.setdefault("MEDFLOWS_DATA_ROOT", str(DATA_ROOT))

# The tests' composition root, as `flows` is the CLI's: every track kit registered once.
from tasks_lib.tracks import catalog  # noqa: E402, F401


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One Prefect test server for the whole session (start it only for tests that need it)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture
def tmp_storage_url(tmp_path: Path) -> str:
    """A fresh local storage root."""
    return str(tmp_path / "storage")


@pytest.fixture
def cache_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private, empty storage root with the call cache on (the session's is off); yields
    the root."""
    from tasks_lib.settings import reset_settings

    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
    monkeypatch.setenv("MEDFLOWS_LLM_CACHE", "true")
    reset_settings()
    yield tmp_path / "storage"
    reset_settings()
