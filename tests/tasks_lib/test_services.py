"""The service registry (:mod:`tasks_lib.services`) on real processes: a live and a dead PID, a
PID that names another process now, stop by PID (SIGTERM, SIGKILL after the wait, a service
that may not be killed), and a command that stops what it started unless told to keep it or
another live process still uses it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks_lib import services
from tasks_lib.services import KEEP_FLAG, ServiceError, ServiceKind, ServiceState

Procs = list[subprocess.Popen[bytes]]

IGNORES_TERM = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "signal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('ready', flush=True)\n"
                "time.sleep(60)\n")
"""A process that ignores SIGTERM and SIGINT (only SIGKILL ends it)."""


@pytest.fixture(autouse=True)
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private services folder."""
    folder = tmp_path / "services"
    monkeypatch.setenv("MEDFLOWS_SERVICES_DIR", str(folder))
    monkeypatch.delenv("MEDFLOWS_KEEP_SERVICES", raising=False)
    return folder


@pytest.fixture
def procs() -> Iterator[Procs]:
    """Processes a test starts; whatever still runs is killed by PID at the end."""
    started: Procs = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _sleeper(procs: Procs, program: str | None = None) -> subprocess.Popen[bytes]:
    argv = ["sleep", "60"] if program is None else [sys.executable, "-c", program]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    procs.append(proc)
    if program is not None:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


def test_a_live_process_is_running_and_a_dead_one_is_stale_once(procs: Procs) -> None:
    live, dead = _sleeper(procs), _sleeper(procs)
    services.register(ServiceKind.SERVE, live.pid, "http://127.0.0.1:1/", name="live")
    services.register(ServiceKind.SERVE, dead.pid, "http://127.0.0.1:2/", name="dead")
    os.kill(dead.pid, signal.SIGKILL)
    dead.wait(timeout=10)

    rows = {r.key: r for r in services.status()}
    assert rows["serve-live"].state is ServiceState.RUNNING
    assert rows["serve-live"].pid == live.pid and rows["serve-live"].keep  # outside a command
    assert rows["serve-dead"].state is ServiceState.STALE
    assert [r.key for r in services.status()] == ["serve-live"]  # the stale record was removed


def test_a_pid_that_names_another_process_now_is_stale_and_never_signalled(
        procs: Procs) -> None:
    other = _sleeper(procs)
    recorded = services.register(ServiceKind.SERVE, other.pid, "http://127.0.0.1:3/")
    services.save(recorded.model_copy(update={"proc_start": (recorded.proc_start or 0) - 1}))

    assert services.stop(ServiceKind.SERVE) == []
    assert other.poll() is None  # the process now holding that pid was left alone
    assert services.status() == []


def test_stop_ends_the_process_by_pid_and_removes_its_record(procs: Procs) -> None:
    proc = _sleeper(procs)
    services.register(ServiceKind.SERVE, proc.pid, "http://127.0.0.1:4/")

    stopped = services.stop(ServiceKind.SERVE)
    assert [s.pid for s in stopped] == [proc.pid]
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert services.status() == []
    assert services.stop() == []


def test_a_process_that_ignores_sigterm_is_killed_after_the_wait(procs: Procs) -> None:
    proc = _sleeper(procs, IGNORES_TERM)
    services.register(ServiceKind.SERVE, proc.pid, "http://127.0.0.1:5/", stop_wait_s=0.5)

    began = time.monotonic()
    assert [s.pid for s in services.stop()] == [proc.pid]
    assert proc.wait(timeout=10) == -signal.SIGKILL
    assert 0.5 <= time.monotonic() - began < 10


def test_a_service_that_may_not_be_killed_is_reported_and_kept(procs: Procs) -> None:
    proc = _sleeper(procs, IGNORES_TERM)
    services.register(ServiceKind.RWE_CLUSTER, proc.pid, "/tmp/x/.s.PGSQL.1", stop_wait_s=0.3,
                      stop_signal="SIGINT", kill=False)

    with pytest.raises(ServiceError, match=f"rwe-cluster \\(pid {proc.pid}\\)"):
        services.stop(ServiceKind.RWE_CLUSTER)
    assert proc.poll() is None
    assert [r.state for r in services.status()] == [ServiceState.RUNNING]


def test_a_command_stops_what_it_started(procs: Procs) -> None:
    proc = _sleeper(procs)
    with services.command_scope(["pool", "build", "rwe", "--seed", "1"]) as args:
        assert args == ["pool", "build", "rwe", "--seed", "1"]
        started = services.register(ServiceKind.SERVE, proc.pid, "http://127.0.0.1:6/")
        assert started.started_by == "medflows pool build rwe --seed 1"
        assert not started.keep
    assert proc.wait(timeout=15) == -signal.SIGTERM
    assert services.status() == []


@pytest.mark.parametrize("how", ["flag", "setting"])
def test_a_command_told_to_keep_leaves_it_running_and_kept(
        procs: Procs, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "setting":
        monkeypatch.setenv("MEDFLOWS_KEEP_SERVICES", "true")
    proc = _sleeper(procs)
    argv = ["pool", "build", "rwe", *([KEEP_FLAG] if how == "flag" else [])]
    with services.command_scope(argv) as args:
        assert KEEP_FLAG not in args
        services.register(ServiceKind.SERVE, proc.pid, "http://127.0.0.1:7/")
    time.sleep(0.2)
    assert proc.poll() is None
    [row] = services.status()
    assert row.keep and row.state is ServiceState.RUNNING
    assert row.started_by == "medflows pool build rwe"


def test_a_service_another_live_process_uses_is_left_to_the_last_user(
        procs: Procs, registry: Path) -> None:
    proc = _sleeper(procs)
    with services.command_scope(["execute", "rwe"]):
        service = services.register(ServiceKind.SERVE, proc.pid, "http://127.0.0.1:8/")
        user = _sleeper(procs, "from tasks_lib.services import use\n"
                               f"use({service.key!r})\nprint('ready', flush=True)\n"
                               "import time\ntime.sleep(60)\n")
    assert proc.poll() is None  # the other command still uses it
    assert services.other_users(service.key) == [user.pid]

    os.kill(user.pid, signal.SIGKILL)
    user.wait(timeout=10)
    with services.command_scope(["score", "--pool", "p"]):  # the last user stops it
        services.register(ServiceKind.SERVE, proc.pid, "http://127.0.0.1:8/",
                          started_here=False)
    assert proc.wait(timeout=15) == -signal.SIGTERM
    assert not list(registry.glob("*.json"))


def test_the_recorded_command_line_masks_passwords_and_secret_options() -> None:
    line = services.command_line(["pool", "build", "rwe", "--database-url",
                                  "postgresql://admin:s3cret@db:5432/x", "--api-key",
                                  "abcdef123456", "--token=zzz999zzz", "--title", "a b"])
    assert "s3cret" not in line and "abcdef123456" not in line and "zzz999zzz" not in line
    assert line == ("medflows pool build rwe --database-url postgresql://admin:***@db:5432/x "
                    "--api-key *** --token=*** --title 'a b'")


def test_serve_is_recorded_while_it_runs() -> None:
    with services.running_here(ServiceKind.SERVE, "http://127.0.0.1:8765", name="8765") as me:
        [row] = services.status()
        assert (row.key, row.pid, row.state) == ("serve-8765", os.getpid(), ServiceState.RUNNING)
        assert me.keep
    assert services.status() == []


def test_apply_local_server_needs_a_live_server_of_this_prefect_home(
        procs: Procs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    assert services.apply_local_server() is None  # nothing recorded
    proc = _sleeper(procs)  # stands for the server process: only its liveness is read here
    services.register(ServiceKind.PREFECT_SERVER, proc.pid, "http://127.0.0.1:9/api",
                      home=str(tmp_path / "other-home"))
    assert services.apply_local_server() is None  # another PREFECT_HOME's server
    services.forget("prefect-server")
    services.register(ServiceKind.PREFECT_SERVER, proc.pid, "http://127.0.0.1:9/api",
                      home=str(services.prefect_home()))
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:10/api")
    assert services.apply_local_server() is None  # an explicit URL wins
    monkeypatch.delenv("PREFECT_API_URL")
    assert services.apply_local_server() == "http://127.0.0.1:9/api"
    assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:9/api"
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    monkeypatch.delenv("PREFECT_API_URL")
    assert services.apply_local_server() is None  # its process is gone


def test_a_service_that_outlives_the_command_s_stop_is_named_on_stderr(
        procs: Procs, capsys: pytest.CaptureFixture[str]) -> None:
    proc = _sleeper(procs, IGNORES_TERM)
    with services.command_scope(["pool", "build", "rwe"]):
        services.register(ServiceKind.RWE_CLUSTER, proc.pid, "/tmp/x/.s.PGSQL.1", name="x",
                          stop_signal="SIGINT", stop_wait_s=0.3, kill=False)
    assert proc.poll() is None
    assert capsys.readouterr().err == (
        f"warning: rwe-cluster-x (pid {proc.pid}) did not stop in 0 s; stop it with: medflows "
        "services stop rwe-cluster\n")


def test_the_cli_lists_and_stops_by_kind_and_refuses_an_unknown_kind(procs: Procs) -> None:
    from typer.testing import CliRunner

    from flows.cli import services as services_cli  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    proc = _sleeper(procs)
    services.register(ServiceKind.SERVE, proc.pid, "http://127.0.0.1:8765", name="8765")
    runner = CliRunner()
    listed = runner.invoke(app, ["services", "status", "--json"])
    [row] = json.loads(listed.stdout)["services"]
    assert set(row) == {"kind", "key", "pid", "address", "started_at", "started_by", "keep",
                        "state"}
    assert (row["kind"], row["pid"], row["state"]) == ("serve", proc.pid, "running")

    for args in (["services", "stop"], ["services", "stop", "dask"],
                 ["services", "stop", "serve", "--all"]):
        refused = runner.invoke(app, args)
        assert refused.exit_code == 2 and refused.stderr.startswith("error: "), args
        assert proc.poll() is None
    stopped = runner.invoke(app, ["services", "stop", "serve", "--json"])
    assert json.loads(stopped.stdout) == {"stopped": [{"kind": "serve", "key": "serve-8765",
                                                       "pid": proc.pid}]}
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert runner.invoke(app, ["services", "status"]).stdout == "nothing running\n"
