"""The local Prefect server (:mod:`tasks_lib.prefect_server`): ``medflows server start`` in a
temporary PREFECT_HOME and services folder, listed alive with its URL, reused by a later process
that runs a flow (the run is kept on that server), stopped by ``medflows server stop``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from faults.procs import alive
from typer.testing import CliRunner

pytestmark = pytest.mark.slow

PROBE = """
from tasks_lib.services import apply_local_server
url = apply_local_server()
from prefect import flow
from prefect.runtime import flow_run

@flow(name="services-probe")
def probe() -> str:
    return str(flow_run.id)

print(url, probe())
"""
"""A later command: picks up the recorded server, then runs a one-step flow."""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private PREFECT_HOME and services folder, no PREFECT_API_URL."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    monkeypatch.setenv("MEDFLOWS_SERVICES_DIR", str(tmp_path / "services"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return tmp_path / "prefect-home"


def _cli(*args: str) -> Any:
    from flows.cli import services  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout) if "--json" in args else out.stdout


def test_a_started_server_is_listed_reused_and_stopped(home: Path) -> None:
    server = _cli("server", "start", "--json")
    try:
        api = server["api_url"]
        assert server["started"] and server["prefect_home"] == str(home.resolve())
        [row] = _cli("services", "status", "--json")["services"]
        assert (row["kind"], row["address"], row["pid"], row["state"]) == (
            "prefect-server", api, server["pid"], "running")
        assert _cli("server", "start", "--json")["started"] is False  # one server, reused

        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        later = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                               text=True, timeout=300, check=False)
        assert later.returncode == 0, later.stderr[-3000:]
        used, run_id = later.stdout.split()[-2:]
        assert used == api and "temporary server" not in later.stderr
        run = httpx.get(f"{api}/flow_runs/{run_id}", timeout=30).json()
        assert (run["id"], run["state_type"]) == (run_id, "COMPLETED")

        assert "stopped the local Prefect server" in _cli("server", "stop")
        assert not alive(server["pid"])
        assert _cli("services", "status", "--json") == {"services": []}
        assert _cli("server", "status") == "nothing running\n"
        assert (home / "prefect.db").is_file()  # the flow and task runs stay
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server["pid"], signal.SIGKILL)
