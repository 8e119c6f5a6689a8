"""Cell failure rules with plain functions (no Prefect): timeout scores what exists (from the
stored run alone), and a corrupt output zeroes S5's validity half; the tool agent is driven by the
fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cells import file_env
from support.openai_server import FakeOpenAIServer

from tasks_lib.domain import RunStatus, Tier
from tasks_lib.harness import cell
from tasks_lib.harness.loop import LoopEnd
from tasks_lib.harness.record import run_record
from tasks_lib.harness.rescore import score_cell
from tasks_lib.harness.steps import execute_step
from tasks_lib.ledger import store
from tasks_lib.records import read_run
from tasks_lib.sandbox.base import SandboxBackend
from tasks_lib.scoring import record_run
from tasks_lib.settings import reset_settings
from tasks_lib.tracks.base import kit_for

TASK = "brain-tissue-seg"


def _call(i: int, language: str, code: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": f"c{i}", "type": "function", "function": {
        "name": "execute_code", "arguments": json.dumps({"language": language, "code": code})}}]}


SCRIPT = [
    _call(1, "python", "open('/workspace/method.py', 'w').write("
          + json.dumps(kit_for("segmentation").recipe()[1]) + ")"),
    _call(2, "bash", "cd /workspace && python method.py --pilot"),
    _call(3, "bash", "head -c 300 /dev/urandom > /workspace/submission/case-001.nii.gz"),
    _call(4, "bash", "sleep 120"),
]


@pytest.mark.slow
def test_timeout_scores_what_exists_and_corrupt_output_fails_validation(
        monkeypatch: pytest.MonkeyPatch, seg_pool: Path) -> None:
    replies = iter(SCRIPT)
    with FakeOpenAIServer(lambda body: next(replies)) as server:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", server.base_url)
        reset_settings()
        env = file_env(TASK, seg_pool, 25)  # the pilot (turn 2) fits under load; turn 4 does not
        plan = cell.plan_cell("gpt-4o-mini@tools", env, Tier.STANDARD, SandboxBackend.LOCAL, 0,
                              "rules")
        execution = cell.execute_cell(plan, env)
    reset_settings()
    assert execution.status is RunStatus.TIMEOUT and execution.end is LoopEnd.TIMEOUT
    assert execution.turns == 4 and execution.wall_time_s < 40
    assert sorted(p.name for p in plan.submission.iterdir()) == [
        "case-000.nii.gz", "case-001.nii.gz"]
    record_run(run_record(plan, execution, env.pool()))
    card = score_cell(read_run(plan.run_id), plan.submission)
    assert card.validation is not None and not card.validation.ok
    # 8 expected cases, 2 present: S4 = 0.5 · 2/8 + 0.5 · [all present valid = no] = 0.125
    assert card.s4 == pytest.approx(0.125)
    assert card.s5 == pytest.approx(0.5)  # case-000 has positive Dice, the suite fails
    assert card.task_score == 0.0  # zero_dice_if_missing
    assert card.s1 == 0.0  # no plan.md
    assert card.coding is not None
    codes = {c.value for c in card.coding.fired}
    assert {"E1", "E4", "E5"} <= codes  # no plan, timeout, never submitted / invalid


def test_provider_failure_ends_the_run_as_error(monkeypatch: pytest.MonkeyPatch,
                                                seg_pool: Path) -> None:
    from support.openai_server import Transient

    from tasks_lib.agents import AgentSpec, Harness

    def down(body: dict[str, Any]) -> str:
        raise Transient()

    with FakeOpenAIServer(down) as server:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", server.base_url)
        reset_settings()
        plan = cell.plan_cell("gpt-4o-mini@tools", file_env(TASK, seg_pool, 60), Tier.LITE,
                              SandboxBackend.LOCAL, 1, "rules")
        agent = AgentSpec(agent_id="flaky", harness=Harness.TOOL_LOOP, model="gpt-4o-mini",
                          params={"retries": 1})
        record = execute_step.fn(plan.model_copy(update={"agent": agent}))
        assert len(server.requests) == 2  # first try + one retry
    reset_settings()
    assert record.status is RunStatus.ERROR and record.end is None
    assert record.error is not None and "ServiceUnavailable" in record.error
    assert record.turns == 0 and read_run(plan.run_id) == record
    messages = json.loads((plan.trace_dir / "conversation.json").read_text())["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert json.loads((plan.trace_dir / "workspace.json").read_text()) == []
    assert list(plan.submission.iterdir()) == []
    row = store.runs(run_id=plan.run_id)[0]  # ledgered before any scoring
    assert (row.agent_id, row.status, row.turns, row.cost_usd) == ("flaky", "error", 0, 0.0)
