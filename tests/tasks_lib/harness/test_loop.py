"""The litellm tool-calling loop against the fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.openai_server import FakeOpenAIServer, Transient

from tasks_lib.harness.loop import AgentLoop, LoopEnd, LoopLimits
from tasks_lib.harness.messages import ToolName
from tasks_lib.harness.policies import LiteLLMPolicy, ScriptedPolicy
from tasks_lib.harness.trace import TraceRecorder
from tasks_lib.sandbox.base import agent_spec
from tasks_lib.sandbox.local import BwrapSandbox

SECRET = "sk-live-0123456789abcdefXYZ"
ENV_SECRET = "hunter2-medflows-token"


def _call(i: int, name: str, arguments: str) -> dict[str, Any]:
    return {"id": f"call_{i}", "type": "function",
            "function": {"name": name, "arguments": arguments}}


def _exec(i: int, language: str, code: str) -> dict[str, Any]:
    return {"tool_calls": [_call(i, "execute_code",
                                 json.dumps({"language": language, "code": code}))]}


class Script:
    """Responder replaying a fixed list of replies; the first request fails once with 503."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies, self.calls, self.failed = replies, 0, False

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if not self.failed:
            self.failed = True
            raise Transient()
        reply = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return reply


@pytest.fixture
def sandbox(tmp_path: Path) -> BwrapSandbox:
    (tmp_path / "public").mkdir()
    (tmp_path / "workspace").mkdir()
    (tmp_path / "public" / "brief.md").write_text("count the cases")
    return BwrapSandbox(agent_spec(tmp_path / "public", tmp_path / "workspace",
                                   [str(tmp_path / "private")]))


def test_litellm_loop_runs_tools_handles_truncation_and_redacts(
        sandbox: BwrapSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDFLOWS_FAKE_API_KEY", ENV_SECRET)
    script = Script([
        {"content": f"Plan first. (debug: {ENV_SECRET})",
         **_exec(0, "bash", "echo '# plan' > plan.md && wc -c < plan.md")},
        {"content": None, "tool_calls": [_call(1, "execute_code", '{"language": "pyth')],
         "finish_reason": "length"},
        {"content": "cut off text", "finish_reason": "length"},
        _exec(2, "python", f"print(6 * 7, '{SECRET}')"),
        {"tool_calls": [_call(3, "submit_results", "{}")]},
    ])
    with FakeOpenAIServer(script) as server:
        policy = LiteLLMPolicy("openai/fake-agent", api_base=server.base_url, base_delay=0.01)
        loop = AgentLoop(policy, sandbox, TraceRecorder(tmp_path / "run"), LoopLimits(max_turns=10))
        outcome = loop.run("You are a researcher.", "Do the task.")
    assert outcome.end is LoopEnd.SUBMITTED
    assert outcome.turns == 5
    assert outcome.violations == []
    assert (tmp_path / "workspace" / "plan.md").read_text() == "# plan\n"
    first = server.requests[0]
    assert first["temperature"] == 0
    assert [t["function"]["name"] for t in first["tools"]] == [t.value for t in ToolName]
    assert first["messages"][0] == {"role": "system", "content": "You are a researcher."}
    assert len(server.requests) == 6  # one 503 retried with backoff + five turns
    tool_replies = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_replies[0]["content"].startswith("exit_code: 0\nstdout:\n7\n")
    assert "not valid JSON (truncated reply?)" in tool_replies[1]["content"]
    assert any("cut off at the output limit" in (m["content"] or "")
               for m in server.requests[-1]["messages"] if m["role"] == "user")
    assert "42" in tool_replies[2]["content"]
    assert outcome.prompt_tokens > 0 and outcome.completion_tokens > 0
    conversation = (tmp_path / "run" / "conversation.json")
    loop.recorder.write_conversation(outcome)
    for path in (conversation, tmp_path / "run" / "trace.jsonl"):
        text = path.read_text()
        assert SECRET not in text and ENV_SECRET not in text
        assert "[REDACTED]" in conversation.read_text()
    messages = json.loads(conversation.read_text())["messages"]
    assert [m["role"] for m in messages[:3]] == ["system", "user", "assistant"]
    assert all(m["at"] > 0 for m in messages)


def test_breach_is_warned_then_terminated(sandbox: BwrapSandbox, tmp_path: Path) -> None:
    private = sandbox.spec.forbidden[0]
    policy = ScriptedPolicy("scripted", [
        ("look around", "bash", "ls /public"),
        ("peek", "bash", f"cat {private}/labels.nii.gz"),
        ("peek again", "python", f"print(open('{private}/x').read())"),
        ("never reached", "bash", "echo unreachable"),
    ])
    loop = AgentLoop(policy, sandbox, TraceRecorder(tmp_path / "run"), LoopLimits())
    outcome = loop.run("sys", "user")
    assert outcome.end is LoopEnd.TERMINATED
    assert outcome.turns == 3 and outcome.warnings == 1
    assert {v.kind.value for v in outcome.violations} == {"read_forbidden"}
    tools = [m.content or "" for m in loop.messages if m.role == "tool"]
    assert "brief.md" in tools[0]
    assert tools[1].startswith("ISOLATION WARNING")
    assert tools[2] == "ISOLATION VIOLATION: the run is terminated."


def test_wall_time_cap_kills_and_keeps_earlier_artifacts(sandbox: BwrapSandbox,
                                                         tmp_path: Path) -> None:
    policy = ScriptedPolicy("scripted", [
        ("write", "bash", "echo early > /workspace/early.txt"),
        ("hang", "bash", "sleep 60 & sleep 60; echo late > /workspace/late.txt"),
    ])
    loop = AgentLoop(policy, sandbox, TraceRecorder(tmp_path / "run"),
                     LoopLimits(wall_time_s=2.5, exec_timeout_s=100))
    outcome = loop.run("sys", "user")
    assert outcome.end is LoopEnd.TIMEOUT
    assert outcome.wall_time_s < 10
    assert (tmp_path / "workspace" / "early.txt").read_text() == "early\n"
    assert not (tmp_path / "workspace" / "late.txt").exists()


def test_turn_limit(sandbox: BwrapSandbox, tmp_path: Path) -> None:
    steps = [("again", "bash", "true")] * 10
    outcome = AgentLoop(ScriptedPolicy("s", steps), sandbox, TraceRecorder(tmp_path / "r"),
                        LoopLimits(max_turns=3)).run("sys", "user")
    assert (outcome.end, outcome.turns) == (LoopEnd.TURN_LIMIT, 3)
    assert os.path.exists(tmp_path / "r" / "trace.jsonl")


def test_a_run_past_its_cost_cap_ends_partial_after_that_turn(sandbox: BwrapSandbox,
                                                              tmp_path: Path) -> None:
    from tasks_lib.domain import RunStatus
    from tasks_lib.harness.cell import _status
    from tasks_lib.pricing import price_snapshot

    replies = [_exec(i, "bash", f"echo step{i} >> /workspace/steps.txt") for i in range(10)]
    model = "openai/gpt-4o-mini"
    cap = price_snapshot().cost(model, 60, 0)
    assert cap is not None
    with FakeOpenAIServer(lambda body: replies[len(body["messages"]) // 2 - 1]) as server:
        policy = LiteLLMPolicy(model, api_base=server.base_url, base_delay=0.01)
        loop = AgentLoop(policy, sandbox, TraceRecorder(tmp_path / "run"),
                         LoopLimits(max_turns=10, max_cost_usd=cap))
        outcome = loop.run("You are a researcher.", "Do the task.")
    events = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text()
              .splitlines()]
    turns = [e["detail"] for e in events if e["kind"] == "model_turn"]
    running = [price_snapshot().cost(model, sum(t["prompt_tokens"] for t in turns[:n]),
                                     sum(t["completion_tokens"] for t in turns[:n]))
               for n in range(1, len(turns) + 1)]
    # It stopped on the first turn whose running cost reached the cap, before acting on it:
    # the turns before it acted, and what they wrote stays (a partial run is still scored).
    assert outcome.end is LoopEnd.BUDGET and _status(outcome.end, []) is RunStatus.PARTIAL
    assert 1 < outcome.turns == len(turns) < 10
    assert all(c is not None and c < cap for c in running[:-1])
    assert running[-1] is not None and running[-1] >= cap
    written = (tmp_path / "workspace" / "steps.txt").read_text().split()
    assert written == [f"step{i}" for i in range(outcome.turns - 1)]
    assert any(e["detail"].get("max_cost_usd") == cap for e in events if e["kind"] == "host")
