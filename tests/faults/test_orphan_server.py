"""``kill -9`` of the ``medflows`` CLI while a flow runs, with no ``PREFECT_API_URL`` (so the CLI
started a temporary Prefect server): that server stops within seconds instead of running on as
an orphan."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from support.paths import QA_SOURCE

from faults.procs import alive, children, cmdline

MEDFLOWS = str(Path(sys.executable).parent / "medflows")
GRACE_S = 10
"""How long the server may take to notice its parent is gone and stop."""


def _healthy(server_pid: int) -> bool:
    port = re.search(r"--port (\d+)", cmdline(server_pid))
    if port is None:
        return False
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port[1]}/api/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@pytest.mark.slow
def test_temporary_server_dies_with_the_killed_cli(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    # A pool build that waits for expert review (no --auto-approve): the flow runs until killed.
    with (tmp_path / "cli.log").open("wb") as log:
        cli = subprocess.Popen(
            [MEDFLOWS, "pool", "build", "qa", "--source", str(QA_SOURCE), "--datasets",
             "medbullets", "--predictions", str(QA_SOURCE / "predictions" / "hard.csv.gz"),
             "--per-dataset", "3", "--no-meld", "--pool-id", "orphan-check",
             "--out", str(tmp_path / "pool")],
            env=env, stdout=log, stderr=subprocess.STDOUT)
    servers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not (servers and all(_healthy(p) for p in servers)):
            assert cli.poll() is None, (tmp_path / "cli.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the CLI started no Prefect server"
            servers = [p for p in children(cli.pid)
                       if "prefect.server.api.server" in cmdline(p)]
            time.sleep(0.2)
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait(timeout=30)
        killed = time.monotonic()
        while any(alive(p) for p in servers) and time.monotonic() - killed < GRACE_S:
            time.sleep(0.1)
        assert not [p for p in servers if alive(p)], "temporary server left running"
    finally:
        for pid in [cli.pid, *servers]:  # only what this test started, by id
            with contextlib.suppress(ProcessLookupError):
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
        cli.wait(timeout=30)
