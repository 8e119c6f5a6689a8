"""``medflows server start|stop|status`` and ``medflows services status`` through the console
script, as a user runs them: a local Prefect server that a later command reuses (its flow runs
are kept on that server), and an RWE command that starts medflows' own cluster and stops it when
it ends. Everything runs in temporary folders and is stopped by PID at the end."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from faults.procs import alive

from tasks_lib.rwe.cluster import Cluster

pytestmark = pytest.mark.slow

MEDFLOWS = str(Path(sys.executable).parent / "medflows")


def _run(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([MEDFLOWS, *args], env=env, capture_output=True, text=True,
                         timeout=timeout, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def _json(env: dict[str, str], *args: str) -> Any:
    return json.loads(_run(env, *args).stdout)


def test_a_local_server_is_reused_and_an_rwe_command_stops_its_cluster(tmp_path: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix="medflows-svc-cli-"))  # the postgres user enters it
    os.chmod(folder, 0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in {"PREFECT_API_URL", "MEDFLOWS_RWE_DB_URL", "MEDFLOWS_KEEP_SERVICES"}}
    env.update({"PREFECT_HOME": str(tmp_path / "prefect-home"),
                "MEDFLOWS_SERVICES_DIR": str(tmp_path / "services"),
                "MEDFLOWS_STORAGE_URL": str(tmp_path / "storage"),
                "MEDFLOWS_LEDGER_URL": f"sqlite:///{tmp_path / 'ledger.db'}",
                "MEDFLOWS_RESULTS_DIR": str(tmp_path / "results"),
                "MEDFLOWS_RWE_CLUSTER_DIR": str(folder / "cluster"),
                "MEDFLOWS_RWE_CLUSTER_PORT": str(55400 + (os.getpid() + 1) % 500),
                # No warm process: no command here hands off to one (test_warm_commands.py
                # starts and stops it), and its imports cost seconds of CPU.
                "MEDFLOWS_WARM_COMMANDS": "false"})
    pids: list[int] = []
    try:
        server = _json(env, "server", "start", "--json")
        pids.append(server["pid"])
        api = server["api_url"]
        assert server["started"] and api.startswith("http://127.0.0.1:")
        [row] = _json(env, "services", "status", "--json")["services"]
        assert (row["kind"], row["address"], row["state"], row["keep"]) == (
            "prefect-server", api, "running", True)
        assert _json(env, "server", "start", "--json")["pid"] == server["pid"]  # reused

        built = _run(env, "pool", "build", "rwe", "--n-patients", "8000", "--studies",
                     "albumin-ap", "--pool-id", "svc-check", "--json")
        assert json.loads(built.stdout)["studies"] == ["albumin-ap"]
        assert "temporary server" not in built.stderr  # the flow ran on the local server
        runs = httpx.post(f"{api}/flow_runs/filter", json={}, timeout=30).json()
        assert [r["state_type"] for r in runs if r["name"] == "construct-rwe-svc-check"] == [
            "COMPLETED"]

        left = _json(env, "services", "status", "--json")["services"]
        assert [r["kind"] for r in left] == ["prefect-server"]  # the cluster was stopped
        assert not (folder / "cluster" / "data" / "postmaster.pid").exists()

        assert "stopped" in _run(env, "server", "stop").stdout
        assert not alive(server["pid"])
        assert _json(env, "services", "status", "--json") == {"services": []}
        assert _run(env, "server", "status").stdout == "nothing running\n"
        assert (tmp_path / "prefect-home" / "prefect.db").is_file()  # the runs are kept
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        Cluster(folder / "cluster", 0).stop()  # by its postmaster's PID, if it still runs
        shutil.rmtree(folder, ignore_errors=True)
