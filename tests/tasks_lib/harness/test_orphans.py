"""A research cell's processes and disk end with it (issue 21, point 3): ``kill -9`` of
``medflows run cell`` while the agent sleeps in its bubblewrap sandbox leaves no strace, bwrap
or agent process, and the next ``run cell`` sweeps the workspace; a run that breaks its disk
quota leaves no scratch bytes on the host."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from faults.procs import alive, children, cmdline
from support.cells import file_env
from support.openai_server import FakeOpenAIServer

from tasks_lib.domain import RunStatus, Tier
from tasks_lib.harness import cell
from tasks_lib.harness.environment import AgentSession
from tasks_lib.sandbox.base import ResourceLimits, SandboxBackend, SandboxSpec
from tasks_lib.sandbox.hostio import disk_usage
from tasks_lib.sandbox.lease import lease_dirs, read_lease
from tasks_lib.settings import reset_settings

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason=(
    "bubblewrap not installed (scripts/system-deps.sh installs it: apt-get install -y "
    "bubblewrap strace)"))

MEDFLOWS = str(Path(sys.executable).parent / "medflows")
TASK = "brain-tissue-seg"


@pytest.fixture(scope="module")
def pool(seg_pool: Path) -> Path:
    """The segmentation pool (the harness conftest's, built once per session)."""
    return seg_pool


def _call(code: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": f"c{uuid.uuid4().hex[:6]}", "type": "function", "function": {
        "name": "execute_code", "arguments": json.dumps({"language": "bash", "code": code})}}]}


def _run_processes(marker: str) -> list[int]:
    """Processes of the run: those whose command line holds ``marker`` (strace, bwrap, the
    agent's shell) and their descendants (the agent's ``sleep``)."""
    found = [int(p.name) for p in Path("/proc").iterdir()
             if p.name.isdigit() and marker in cmdline(int(p.name)) and alive(int(p.name))]
    todo = list(found)
    while todo:
        for child in children(todo.pop()):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def _cell_lease(owner: int) -> Path | None:
    for folder in lease_dirs():
        for path in folder.glob("run-*.json") if folder.is_dir() else []:
            record = read_lease(path)
            if record is not None and record.owner_pid == owner:
                return path
    return None


def _next_run_cell_sweeps(argv: list[str], env: dict[str, str]) -> str:
    """Start the next ``run cell`` and read its stderr until the sweep has spoken (the sweep
    runs before the cell: the command is stopped there, before it starts anything)."""
    nxt = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    lines: list[str] = []
    try:
        assert nxt.stderr is not None
        for line in nxt.stderr:
            lines.append(line)
            if "removed scratch" in line:
                break
    finally:
        nxt.kill()
        nxt.wait(timeout=30)
    return "".join(lines)


@needs_bwrap
@pytest.mark.slow
def test_kill_9_of_run_cell_leaves_no_process_and_the_next_run_cell_sweeps(
        pool: Path, tmp_path: Path, prefect_harness: None) -> None:
    from prefect.settings import PREFECT_API_URL

    marker = f"orphan-{uuid.uuid4().hex[:10]}"
    with FakeOpenAIServer(lambda body: _call(f"sleep 300; echo {marker}")) as server:
        # the session's Prefect server: the CLI's own temporary one (~20 s of CPU to start) is
        # not what this test is about (tests/faults/test_orphan_server.py kills one)
        env = {**os.environ, "MEDFLOWS_LLM_API_BASE": server.base_url,
               "PREFECT_HOME": str(tmp_path / "prefect-home"),
               "PREFECT_API_URL": str(PREFECT_API_URL.value())}
        argv = [MEDFLOWS, "run", "cell", "--agent", "gpt-4o-mini@tools", "--task", TASK,
                "--judge-model", "rules"]
        with (tmp_path / "cli.log").open("wb") as log:
            cli = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            while not any(cmdline(p).split(" ")[0] == "sleep" for p in _run_processes(marker)):
                assert cli.poll() is None, (tmp_path / "cli.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the agent never started sleeping"
                time.sleep(0.2)
            lease = _cell_lease(cli.pid)
            assert lease is not None
            record = read_lease(lease)
            assert record is not None and record.groups
            workspace = record.scratch[0].path
            assert workspace.name == "workspace" and workspace.is_dir()
            os.kill(cli.pid, signal.SIGKILL)
            cli.wait(timeout=30)
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait()
    try:
        deadline = time.monotonic() + 10
        while _run_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {p: cmdline(p)[:80] for p in _run_processes(marker)}
        assert not left, f"processes outlived the killed CLI: {left}"
        assert workspace.is_dir() and lease.exists(), "nothing swept before the next command"
        stderr = _next_run_cell_sweeps([*argv[:4], "no-such-agent", *argv[5:]], env)
        assert f"removed scratch {workspace}" in stderr, stderr[-3000:]
        assert not workspace.exists() and not lease.exists()
        assert (workspace.parent / "trace" / "trace.jsonl").exists()  # the trace is kept
    finally:
        for pid in _run_processes(marker):
            os.kill(pid, signal.SIGKILL)


@needs_bwrap
@pytest.mark.slow
def test_a_run_over_its_disk_quota_leaves_no_scratch_bytes(
        pool: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = ResourceLimits(workspace_mb=8, quota_poll_s=0.1)
    planned = AgentSession.sandbox

    def tight(session: AgentSession) -> SandboxSpec:
        return planned(session).model_copy(update={"limits": small})

    monkeypatch.setattr(AgentSession, "sandbox", tight)
    fill = _call("head -c 64000000 /dev/zero > /workspace/fill.bin; sleep 20")
    with FakeOpenAIServer(lambda body: fill) as server:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", server.base_url)
        reset_settings()
        env = file_env(TASK, pool, 60)
        plan = cell.plan_cell("gpt-4o-mini@tools", env, Tier.LITE, SandboxBackend.LOCAL, 0,
                              "rules")
        execution = cell.execute_cell(plan, env)
    reset_settings()
    assert execution.status is RunStatus.INVALID and execution.wall_time_s < 20
    assert any("disk quota exceeded" in v.evidence for v in execution.violations)
    assert not plan.workspace.exists()
    used, _ = disk_usage(plan.run_dir)
    assert used < 2**20, f"{used} bytes left in {plan.run_dir}"
    assert sorted(p.name for p in plan.run_dir.iterdir()) == ["submission", "trace"]
    events = (plan.trace_dir / "trace.jsonl").read_text()
    assert "removed (" in events and "bytes on disk)" in events
    assert _cell_lease(os.getpid()) is None  # the lease is released


SANDBOX_OWNER = """
import sys, tempfile
from pathlib import Path
from tasks_lib.sandbox.base import Language, agent_spec
from tasks_lib.sandbox.local import BwrapSandbox
root = Path(tempfile.mkdtemp())
(root / "public").mkdir(); (root / "workspace").mkdir()
sandbox = BwrapSandbox(agent_spec(root / "public", root / "workspace", []))
print(sandbox.lease.path, flush=True)
sandbox.execute(Language.BASH, f"sleep 300; echo {sys.argv[1]}", 600)
"""


@needs_bwrap
def test_the_sandbox_dies_with_its_owner_and_the_sweep_frees_the_rest() -> None:
    from tasks_lib.sweep import sweep_orphans

    marker = f"orphan-{uuid.uuid4().hex[:10]}"
    owner = subprocess.Popen([sys.executable, "-c", SANDBOX_OWNER, marker],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        lease = Path(owner.stdout.readline().strip())
        deadline = time.monotonic() + 60
        while not any(cmdline(p).startswith("sleep") for p in _run_processes(marker)):
            assert owner.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        record = read_lease(lease)
        assert record is not None and len(record.groups) == 1
        etc = record.scratch[0].path
        assert etc.is_dir()
    finally:
        owner.kill()
        owner.wait()
    try:
        deadline = time.monotonic() + 5
        while _run_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _run_processes(marker), "strace, bwrap or the agent outlived their owner"
        removed = sweep_orphans()
        assert any(line.endswith(f"removed scratch {etc} (0.0 MiB)") for line in removed)
        assert not lease.exists() and not etc.exists()
    finally:
        for pid in _run_processes(marker):
            os.kill(pid, signal.SIGKILL)

DOCKER_OWNER = """
import sys, tempfile, time
from pathlib import Path
from tasks_lib.sandbox.base import agent_spec
from tasks_lib.sandbox.docker_backend import DockerSandbox
root = Path(tempfile.mkdtemp())
(root / "public").mkdir(); (root / "workspace").mkdir()
sandbox = DockerSandbox(agent_spec(root / "public", root / "workspace", []), monitor=False)
print(sandbox.name, flush=True)
time.sleep(300)
"""


@pytest.mark.slow
def test_the_container_of_a_killed_owner_is_removed_by_the_sweep(docker_env: str) -> None:
    import docker

    from tasks_lib.sweep import sweep_orphans

    owner = subprocess.Popen([sys.executable, "-c", DOCKER_OWNER], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert owner.stdout is not None
        name = owner.stdout.readline().strip()
        engine = docker.DockerClient(base_url=docker_env)
        container = engine.containers.get(name)
        assert container.status == "running" and container.labels["medflows.lease"]
    finally:
        owner.kill()
        owner.wait()
    removed = sweep_orphans()
    assert any(line.endswith(f"removed container {name}") for line in removed), removed
    with pytest.raises(docker.errors.NotFound):
        engine.containers.get(name)
