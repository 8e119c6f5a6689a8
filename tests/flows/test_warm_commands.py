"""After ``medflows server start``, ``execute qa`` runs in a child of the warm process (issue 26,
"flows that start fast"): the command's own process imports neither Prefect nor litellm, the
flow and its task runs are recorded on the local server, the answers are those of a run in the
command's own process, Ctrl-C reaches the child, and ``server stop`` stops the warm process.
Everything runs in temporary folders (the session's ledger and storage) and is stopped by PID."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from faults.procs import alive
from support.cli_child import MEDFLOWS, run_main
from support.openai_server import FakeOpenAIServer

from tasks_lib import warm_start
from tasks_lib.warm_server import WarmServer

HEAVY = ("prefect", "litellm", "openai")


def _reply(body: dict[str, Any]) -> str:
    """Option B for every question; the answer extractor's JSON for its requests."""
    return json.dumps({"answer_idx": "B"}) if "response_format" in body else "The answer is (B)."


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The session's settings with this test's own Prefect home and service records."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"PREFECT_API_URL", "MEDFLOWS_WARM_COMMANDS", "MEDFLOWS_KEEP_SERVICES"}}
    env.update({"PREFECT_HOME": str(tmp_path / "prefect-home"),
                "MEDFLOWS_SERVICES_DIR": str(tmp_path / "services"), **extra})
    return env


def _wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``medflows server start`` (Prefect server and warm process) for this module's tests,
    stopped at the end."""
    tmp_path = tmp_path_factory.mktemp("warm")
    env = _env(tmp_path)
    started = subprocess.run([MEDFLOWS, "server", "start", "--json"], env=env,
                             capture_output=True, text=True, timeout=600, check=False)
    assert started.returncode == 0, started.stderr[-3000:]
    server = json.loads(started.stdout)
    record = tmp_path / "services" / warm_start.RECORD
    warm = json.loads(record.read_text())["pid"]
    try:
        _wait_for(lambda: (tmp_path / "services" / warm_start.SOCKET).exists(), 300,
                  "the warm process to listen")
        yield {**server, "warm_pid": warm, "env": env, "services": tmp_path / "services"}
    finally:
        subprocess.run([MEDFLOWS, "server", "stop"], env=env, capture_output=True, timeout=120,
                       check=False)
        for pid in (server["pid"], warm):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_execute_qa_runs_in_the_warm_process_and_records_its_flow(
        tmp_path: Path, local_server: dict[str, Any]) -> None:
    from support.ops_support import publish_test_pool

    pool = publish_test_pool("warm-check", {"medqa": 6, "medbullets": 4}).url
    with FakeOpenAIServer(_reply) as provider:
        env = {**local_server["env"], "MEDFLOWS_LLM_API_BASE": provider.base_url,
               "OPENAI_API_KEY": "test"}
        done, code, modules = run_main(
            tmp_path / "client.json", ["execute", "qa", "--pool", pool, "--agents",
                                       "gpt-4o-mini@zero_shot", "--max-connections", "4",
                                       "--no-cache", "--no-progress"], env, timeout=600)
        assert code == 0, done.stderr[-3000:]
        [run] = json.loads(done.stdout)
        assert (run["status"], run["n_answered"], run["error"]) == ("completed", 10, None)
        assert len(provider.requests) == 20  # an answer and an extractor call per item
    # The command's own process only handed it off: the child did the work.
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY) == []
    assert done.stderr == ""

    api = local_server["api_url"]
    [flow_run] = [r for r in httpx.post(f"{api}/flow_runs/filter", json={}, timeout=30).json()
                  if r["name"] == "execute-qa"]
    assert flow_run["state_type"] == "COMPLETED"
    tasks = httpx.post(f"{api}/task_runs/filter", timeout=30, json={
        "flow_runs": {"id": {"any_": [flow_run["id"]]}}}).json()
    assert {t["name"].split("-")[0] for t in tasks} >= {"plan", "execute", "assemble", "record"}
    assert all(t["state_type"] == "COMPLETED" for t in tasks)

    # The child wrote the run where a command's own process would: its submission, ledgered.
    from tasks_lib.records import SUBMISSION, read_run, run_store
    from tasks_lib.tracks.qa import ANSWERS

    assert read_run(run["run_id"]).n_answered == 10
    lines = run_store(run["run_id"]).read_text(f"{SUBMISSION}/{ANSWERS}").splitlines()
    assert [json.loads(line)["answer"] for line in lines] == ["B"] * 10


def _start(env: dict[str, str], pool: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [MEDFLOWS, "execute", "qa", "--pool", pool, "--agents", "gpt-4o-mini@zero_shot",
         "--max-connections", "2", "--no-cache", "--no-progress"], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _quiet(provider: FakeOpenAIServer) -> int:
    """Requests once no more arrive (one in flight may still land after its sender ended)."""
    time.sleep(1.5)
    sent = len(provider.requests)
    time.sleep(1.5)
    assert len(provider.requests) == sent
    return sent


@pytest.mark.slow
def test_signals_reach_the_child_and_server_stop_stops_the_warm_process(
        local_server: dict[str, Any]) -> None:
    from support.ops_support import publish_test_pool

    pool = publish_test_pool("warm-interrupt", {"medqa": 40}).url
    with FakeOpenAIServer(_reply, latency=0.5) as provider:
        env = {**local_server["env"], "MEDFLOWS_LLM_API_BASE": provider.base_url,
               "OPENAI_API_KEY": "test"}
        # Ctrl-C: the child gets it (as a command's own process would, it ends the run with
        # exit code 130; the warm process has no terminal of its own to receive it).
        command = _start(env, pool)
        _wait_for(lambda: provider.requests, 300, "the first model call")
        command.send_signal(signal.SIGINT)
        _, err = command.communicate(timeout=120)
        assert command.returncode == 130, err[-3000:]
        first = _quiet(provider)
        # A command killed outright: its child is stopped, the run's remaining calls unsent.
        command = _start(env, pool)
        _wait_for(lambda: len(provider.requests) > first, 300, "the first model call")
        command.kill()
        command.communicate(timeout=60)
        assert _quiet(provider) - first < 80

    warm = local_server["warm_pid"]
    assert alive(warm)
    stopped = subprocess.run([MEDFLOWS, "server", "stop"], env=local_server["env"],
                             capture_output=True, text=True, timeout=120, check=False)
    assert "stopped the local Prefect server" in stopped.stdout
    _wait_for(lambda: not alive(warm), 30, "the warm process to stop")
    assert not (local_server["services"] / warm_start.SOCKET).exists()
    assert not (local_server["services"] / warm_start.RECORD).exists()


def test_a_command_runs_in_its_own_process_without_a_warm_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDFLOWS_SERVICES_DIR", str(tmp_path))
    assert warm_start.hand_off(["execute", "qa", "--pool", "x"]) is None  # nothing listens
    (tmp_path / warm_start.SOCKET).touch()  # a stale file: nothing accepts
    assert warm_start.hand_off(["execute", "qa", "--pool", "x"]) is None
    monkeypatch.setenv("MEDFLOWS_WARM_COMMANDS", "false")
    assert not warm_start.enabled()
    assert warm_start.launch(os.getpid(), "http://127.0.0.1:9/api") is None
    assert not (tmp_path / warm_start.RECORD).exists()


def test_the_warm_process_refuses_what_its_imports_did_not_see(tmp_path: Path) -> None:
    listener, other_end = socket.socketpair()  # no file: the loop is not run here
    with listener, other_end:
        server = WarmServer(listener, os.getpid(), None, warm_start.source_stamp())
        env = dict(os.environ)
        request = {"argv": ["execute", "qa"], "env": env, "cwd": str(tmp_path),
                   **warm_start.identity()}
        fds = [0, 1, 2]
        other = {**request, "env": {**env, "PREFECT_CLIENT_MAX_RETRIES": "9"}}
        assert server.refusal(other, fds) == ("the environment the libraries were imported "
                                              "with differs")
        other = {**request, "env": {**env, "LITELLM_LOG": "DEBUG"}}
        assert server.refusal(other, fds) is not None
        other = {**request, "python": "/usr/bin/python3"}
        assert server.refusal(other, fds) == "another interpreter or checkout"
        assert server.refusal(request, [0]) == "three standard streams expected"
        server.stamp = "an older checkout"
        assert server.refusal(request, fds) == ("the source changed since the warm process "
                                                "started")
        assert server.stale and server.stopping  # it stops listening and imports afresh
        # Settings read when used (the provider's address, keys) may differ.
        server.stamp, server.stale, server.stopping = warm_start.source_stamp(), False, False
        mine = {**request, "env": {**env, "MEDFLOWS_LLM_API_BASE": "http://127.0.0.1:9/v1",
                                   "OPENAI_API_KEY": "another"}}
        assert server.refusal(mine, fds) in (None, "a thread runs (forking is unsafe)")


@pytest.mark.usefixtures("prefect_harness")
def test_execute_qa_in_its_own_process_registers_only_the_qa_kit(tmp_path: Path) -> None:
    from prefect.settings import PREFECT_API_URL
    from support.ops_support import publish_test_pool
    from support.paths import QA_SOURCE

    pool = publish_test_pool("own-process", {"medqa": 5}).url
    env = _env(tmp_path, PREFECT_API_URL=str(PREFECT_API_URL.value()))
    done, code, modules = run_main(
        tmp_path / "modules.json", ["execute", "qa", "--pool", pool, "--replay",
                                    str(QA_SOURCE / "predictions" / "hard.csv.gz"),
                                    "--replay-models", "gpt-4o", "--replay-methods",
                                    "zero_shot"], env, timeout=600)
    assert code == 0, done.stderr[-3000:]
    [run] = json.loads(done.stdout)
    assert (run["agent_id"], run["status"]) == ("replay:gpt-4o@zero_shot", "completed")
    # Registering every kit cost execute qa 1.5 s before its first model call.
    assert "tasks_lib.tracks.qa" in modules and "tasks_lib.tracks.catalog" not in modules
    other_kits = sorted(m for m in modules if m.startswith("tasks_lib.tracks.")
                        and m.split(".")[2] in {"challenge", "rwe", "medbench", "segmentation",
                                                "detection", "enhancement", "vqa",
                                                "report_generation"})
    assert other_kits == []
    assert not {"matplotlib", "great_expectations", "torch", "sklearn"} & {
        m.split(".")[0] for m in modules}


def _temporary_servers(prefect_home: Path) -> list[int]:
    """Live Prefect servers (uvicorn with Prefect's app) whose ``PREFECT_HOME`` is this one."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (b"prefect.server.api.server" in line
                and f"PREFECT_HOME={prefect_home}".encode() in environ and alive(int(entry.name))):
            found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_without_a_server_execute_qa_starts_the_temporary_one_first_and_stops_it(
        tmp_path: Path) -> None:
    import sqlite3

    from support.ops_support import publish_test_pool

    pool = publish_test_pool("temporary-server", {"medqa": 4}).url
    with FakeOpenAIServer(_reply) as provider:
        env = _env(tmp_path, MEDFLOWS_LLM_API_BASE=provider.base_url, OPENAI_API_KEY="test",
                   MEDFLOWS_RESULTS_DIR=str(tmp_path / "results"))
        done = subprocess.run(
            [MEDFLOWS, "execute", "qa", "--pool", pool, "--agents", "gpt-4o-mini@zero_shot",
             "--no-cache", "--no-progress"], env=env, capture_output=True, text=True,
            timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""  # the server's own output went to the command's log
    [run] = json.loads(done.stdout)
    assert (run["status"], run["n_answered"]) == ("completed", 4)
    assert _temporary_servers(tmp_path / "prefect-home") == []  # stopped at exit
    # The flow ran on the server medflows started before importing Prefect, not on one Prefect
    # started once the flow needed it (Prefect logs that to the command's log).
    logs = "".join(p.read_text() for p in (tmp_path / "results" / "logs").glob("cli-*.log"))
    assert "Starting temporary server" not in logs
    with sqlite3.connect(tmp_path / "prefect-home" / "prefect.db") as db:  # the runs are kept
        states = db.execute("SELECT state_type FROM flow_run WHERE name = 'execute-qa'").fetchall()
    assert states == [("COMPLETED",)]
