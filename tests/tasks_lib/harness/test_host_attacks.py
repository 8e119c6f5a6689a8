"""Agent-side attacks on the host (bwrap): each run ends in the ledger with its status and cost,
the host's memory stays bounded, and a host step that crashes never loses the run row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cells import file_env
from support.openai_server import FakeOpenAIServer

from tasks_lib.compute import peak_rss, reset_peak_rss
from tasks_lib.domain import RunStatus, Tier
from tasks_lib.harness import cell
from tasks_lib.harness.policies import ScriptedPolicy
from tasks_lib.harness.steps import execute_step
from tasks_lib.harness.trace import TraceRecorder
from tasks_lib.ledger import store
from tasks_lib.records import read_run
from tasks_lib.sandbox.base import Language, agent_spec
from tasks_lib.sandbox.hostio import remove_tree
from tasks_lib.sandbox.local import BwrapSandbox
from tasks_lib.settings import reset_settings

TASK = "brain-tissue-seg"
pytestmark = pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="bwrap missing")


def _call(i: int, language: str, code: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": f"c{i}", "type": "function", "function": {
        "name": "execute_code", "arguments": json.dumps({"language": language, "code": code})}}]}


ATTACKS = [
    ("bash", "head -c 400000000 /dev/zero | tr '\\0' a"),                      # 400 MB stdout
    ("bash", "truncate -s 3G /workspace/plan.md; ls -ls /workspace/plan.md"),   # 3 GiB sparse
    ("python", "import numpy as np\na = np.ones(3 * 2**30 // 8)\nprint(a.sum())"),  # 3 GiB
    ("bash", "bash -c 'b(){ b | b & }; b; sleep 3'; echo survived"),              # fork bomb
    ("bash", "mkdir -p /workspace/submission && cd /workspace/submission && mkfifo case-000.nii.gz"
             " && truncate -s 900M case-001.nii.gz && ln -s /private/references refs && ls"),
    ("python", "import os\nfd = os.open('/workspace', os.O_RDONLY)\nfor _ in range(1100):\n"
               "    os.mkdir('d', dir_fd=fd)\n    fd = os.open('d', os.O_RDONLY, dir_fd=fd)\n"
               "print('deep')"),                                                 # 1,100 levels
]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "docker"])
def test_attacks_end_in_the_ledger_with_bounded_host_memory(
        backend: str, monkeypatch: pytest.MonkeyPatch, seg_pool: Path,
        request: pytest.FixtureRequest) -> None:
    if backend == "docker":
        request.getfixturevalue("docker_env")
    replies = iter([_call(i, lang, code) for i, (lang, code) in enumerate(ATTACKS)]
                   + [{"tool_calls": [{"id": "s", "type": "function", "function": {
                       "name": "submit_results", "arguments": "{}"}}]}])
    with FakeOpenAIServer(lambda body: next(replies)) as server:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", server.base_url)
        reset_settings()
        plan = cell.plan_cell("gpt-4o-mini@tools", file_env(TASK, seg_pool, 120), Tier.LITE,
                              cell.SandboxBackend(backend), 0, "rules")
        before = reset_peak_rss()
        try:
            record = execute_step.fn(plan)
        finally:
            remove_tree(plan.workspace)
        grown = peak_rss() - before
    reset_settings()
    assert grown < 2**30  # the attacks cost the host < 1 GiB
    row = store.runs(run_id=plan.run_id)[0]
    assert (row.status, row.turns) == ("invalid", len(ATTACKS)), record.error
    assert row.cost_usd is not None and row.input_tokens and row.input_tokens > 0
    assert read_run(plan.run_id) == record
    assert any(v.startswith("resource_limit:") for v in record.violations), record.violations
    assert any(v.startswith("symlink_escape:") for v in record.violations), record.violations
    tools = [m["content"] for m in json.loads(
        (plan.trace_dir / "conversation.json").read_text())["messages"] if m["role"] == "tool"]
    assert "bytes truncated" in tools[0] and len(tools[0]) < 50_000       # stdout capped
    assert "File size limit exceeded" in tools[1] or "File too large" in tools[1]
    assert any(m in tools[2] for m in ("MemoryError", "Unable to allocate", "exit_code: 137"))
    assert "survived" in tools[3]                                           # the host survived
    if backend == "local":
        assert "processes" in tools[3]                                      # pids limit reached
    assert "ISOLATION WARNING" in tools[4]                                  # the planted link
    assert tools[5] == "ISOLATION VIOLATION: the run is terminated."       # the deep tree
    stored = sorted(p.name for p in plan.submission.iterdir())
    assert stored == ["refs"]  # FIFO skipped, 900 MB file over the copy cap, link kept as link
    events = [json.loads(line) for line in (plan.trace_dir / "trace.jsonl").read_text().split(
        "\n") if line]
    assert any("case-001.nii.gz" in str(e["detail"]) for e in events if e["kind"] == "host")


def test_host_step_crash_keeps_the_run_row(monkeypatch: pytest.MonkeyPatch,
                                           seg_pool: Path) -> None:
    reset_settings()
    plan = cell.plan_cell("scripted-baseline", file_env(TASK, seg_pool, 60), Tier.LITE,
                          cell.SandboxBackend.LOCAL, 3, "rules")

    def boom(self: TraceRecorder, workspace: Path, *args: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    original = TraceRecorder.write_workspace
    monkeypatch.setattr(TraceRecorder, "write_workspace", boom)
    monkeypatch.setattr(cell, "make_policy", lambda p, s: ScriptedPolicy(
        "scripted-baseline", [("S1", "bash", "echo '# p' > plan.md")]))
    record = execute_step.fn(plan)
    assert record.status is RunStatus.INVALID
    assert any("workspace listing failed: RecursionError" in v for v in record.violations)
    row = store.runs(run_id=plan.run_id)[0]
    assert (row.status, row.cost_usd) == ("invalid", 0.0)
    assert json.loads((plan.trace_dir / "workspace.json").read_text()) == []

    def explode(self: BwrapSandbox, language: Language, code: str, timeout_s: float) -> None:
        raise OSError("sandbox blew up")

    monkeypatch.setattr(TraceRecorder, "write_workspace", original)
    monkeypatch.setattr(BwrapSandbox, "execute", explode)
    crashed = execute_step.fn(plan.model_copy(update={"run_id": plan.run_id + "x",
                                                      "run_dir": plan.run_dir.parent
                                                      / (plan.run_id + "x")}))
    assert crashed.status is RunStatus.ERROR
    assert crashed.error is not None and crashed.error.startswith("host: OSError")
    assert crashed.turns == 1
    assert store.runs(run_id=crashed.run_id)[0].status == "error"


def test_sandbox_limits_are_enforced(tmp_path: Path) -> None:
    for name in ("public", "workspace"):
        (tmp_path / name).mkdir()
    spec = agent_spec(tmp_path / "public", tmp_path / "workspace", [])
    limits = spec.limits.model_copy(update={"tmp_mb": 8, "workspace_mb": 20, "file_mb": 50,
                                            "quota_poll_s": 0.2})
    sandbox = BwrapSandbox(spec.model_copy(update={"limits": limits}))
    try:
        tmp = sandbox.execute(Language.BASH, "head -c 20000000 /dev/zero > /tmp/x; echo rc=$?",
                              30)
        assert "No space left on device" in tmp.stderr
        quota = sandbox.execute(Language.BASH, "for i in 1 2 3 4 5 6; do head -c 10000000 "
                                "/dev/urandom > /workspace/f$i; sleep 0.3; done; sleep 5", 30)
        assert "disk" in quota.limits_hit and quota.duration_s < 5
        assert [v.kind.value for v in quota.observed] == ["resource_limit"]
        big = sandbox.execute(Language.BASH, "rm -f /workspace/f*; truncate -s 60M "
                              "/workspace/big; echo rc=$?", 30)
        assert "rc=0" not in big.stdout
    finally:
        sandbox.close()
