"""medflows' own RWE cluster as a service (:mod:`tasks_lib.services`): a command that started it
stops it when it ends, unless told to keep it or another live process still uses it; a kept
cluster is listed and stopped with its own fast shutdown by ``medflows services stop``. A real
cluster in a fresh folder, never the test process's shared one."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tasks_lib import services
from tasks_lib.rwe.cluster import Cluster
from tasks_lib.services import KEEP_FLAG, ServiceKind, ServiceState

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """A fresh cluster folder (created on first start) and a private services folder; the
    postmaster is stopped by its PID at the end whatever happened."""
    monkeypatch.setenv("MEDFLOWS_SERVICES_DIR", str(tmp_path / "services"))
    monkeypatch.delenv("MEDFLOWS_KEEP_SERVICES", raising=False)
    folder = Path(tempfile.mkdtemp(prefix="medflows-svc-"))  # traversable by the postgres user
    os.chmod(folder, 0o755)
    made = Cluster(folder / "state", 55400 + os.getpid() % 500)
    try:
        yield made
    finally:
        made.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _status() -> list[dict[str, object]]:
    from flows.cli import services as services_cli  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    out = CliRunner().invoke(app, ["services", "status", "--json"])
    assert out.exit_code == 0, out.output
    import json

    rows: list[dict[str, object]] = json.loads(out.stdout)["services"]
    return rows


def test_a_command_that_started_the_cluster_stops_it_at_its_end(cluster: Cluster) -> None:
    with services.command_scope(["pool", "build", "rwe", "--seed", "0"]):
        cluster.start()
        running = cluster.pid()
        [row] = _status()
        assert row["kind"] == "rwe-cluster" and row["pid"] == running
        assert row["keep"] is False and row["started_by"] == "medflows pool build rwe --seed 0"
        assert row["address"] == str(cluster.socket / f".s.PGSQL.{cluster.port}")
    assert cluster.pid() is None
    assert _status() == []


def test_a_kept_cluster_runs_on_until_services_stop(cluster: Cluster) -> None:
    with services.command_scope(["pool", "build", "rwe", KEEP_FLAG]):
        cluster.start()
    pid = cluster.pid()
    assert pid is not None
    with services.command_scope(["execute", "rwe"]):  # a later command uses it and leaves it
        cluster.start()
    [row] = _status()
    assert (row["pid"], row["keep"], row["state"]) == (pid, True, ServiceState.RUNNING.value)

    stopped = services.stop(ServiceKind.RWE_CLUSTER)
    assert [s.pid for s in stopped] == [pid]
    assert cluster.pid() is None and "fast shutdown" in cluster.log.read_text()
    assert _status() == []


def test_the_last_command_using_the_cluster_stops_it(cluster: Cluster) -> None:
    with services.command_scope(["pool", "build", "rwe"]):
        cluster.start()
        other = subprocess.Popen(  # another command using the cluster meanwhile
            [sys.executable, "-c", "from tasks_lib.services import use\n"
             f"use({cluster.service_key()!r})\nprint('ready', flush=True)\n"
             "import time\ntime.sleep(60)\n"], stdout=subprocess.PIPE)
        try:
            assert other.stdout is not None and other.stdout.readline() == b"ready\n"
        except BaseException:
            os.kill(other.pid, signal.SIGKILL)
            raise
    try:
        assert cluster.pid() is not None  # still in use by the other process
    finally:
        os.kill(other.pid, signal.SIGKILL)
        other.wait(timeout=10)
    with services.command_scope(["score", "--pool", "p"]):
        cluster.start()
    assert cluster.pid() is None
    assert _status() == []
