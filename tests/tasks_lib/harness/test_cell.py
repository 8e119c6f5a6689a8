"""Research cells end to end under the Prefect test harness (bubblewrap sandbox): execute
stores submission + trace + run record, the score flow scores them from storage. The scripted
baseline's cell is checked in tests/tasks_lib/harness/test_rescore.py, which re-scores it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.openai_server import FakeOpenAIServer

from tasks_lib.harness.scripted import baseline_steps
from tasks_lib.ledger import store
from tasks_lib.records import read_card
from tasks_lib.settings import reset_settings

pytestmark = pytest.mark.slow  # end-to-end cells: ~30 s each with the evaluator sandbox

TASK = "brain-tissue-seg"
SECRET = "sk-cell-test-0123456789abcdef"


@pytest.fixture
def harness(prefect_harness: None, seg_pool: Path) -> Iterator[None]:
    reset_settings()
    yield
    reset_settings()


def _ledger(run_id: str) -> tuple[Any, Any]:
    run = store.runs(run_id=run_id)[0]
    score = store.scores_for([run_id])[-1]
    return run, score


def test_scripted_breach_cell_is_invalid_with_zero_stages(harness: None) -> None:
    from flows.execute import run_cell

    report = run_cell(agent_id="scripted-breach", task_id=TASK, tier="standard",
                      judge_model="rules")
    assert report.status.value == "invalid"
    assert report.stages.model_dump() == {"s1": 0.0, "s2": 0.0, "s3": 0.0, "s4": 0.0, "s5": 0.0}
    assert (report.agentic, report.task_score, report.overall) == (0.0, 0.0, 0.0)
    assert any(v.startswith("read_forbidden") for v in report.violations)
    assert list(Path(report.submission_url).iterdir()) == []  # terminated before inference
    run, score = _ledger(report.run_id)
    assert run.status == "invalid" and run.cost_usd == 0.0 and score.overall == 0.0
    assert report.score_url is not None
    card = read_card(report.run_id, report.evaluator_version or "")
    assert card.invalid_reason is not None and card.invalid_reason.startswith("isolation: ")


class ToolAgentAndJudge:
    """Fake provider: replays the baseline as tool calls; judges answer, S2's judge is broken."""

    def __init__(self) -> None:
        self.steps = baseline_steps("segmentation")
        self.turn = 0

    def __call__(self, body: dict[str, Any]) -> dict[str, Any] | str:
        if body.get("tools"):
            self.turn += 1
            if self.turn > len(self.steps):
                return {"tool_calls": [{"id": "done", "type": "function", "function": {
                    "name": "submit_results", "arguments": "{}"}}]}
            thought, language, code = self.steps[self.turn - 1]
            return {"content": f"{thought} key={SECRET}", "tool_calls": [{
                "id": f"c{self.turn}", "type": "function", "function": {
                    "name": "execute_code",
                    "arguments": json.dumps({"language": language, "code": code})}}]}
        prompt = body["messages"][-1]["content"]
        if "Stage S2" in prompt:
            return "I cannot grade this."
        if "Stage S3" in prompt:
            return '{"score": 1, "rationale": "pilot checked"}'
        if "Stage S1" in prompt:
            return json.dumps({"items": {"clear_pipeline": "yes", "model_fits_target": "yes",
                                         "models_researched": "yes", "diagram_clear": "yes"}})
        return '{"fired": [], "evidence": {}, "dominant": null}'


def test_tool_agent_cell_with_llm_judge_records_judge_failure(
        harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.execute import run_cell

    with FakeOpenAIServer(ToolAgentAndJudge()) as server:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        reset_settings()
        report = run_cell(agent_id="gpt-4o-mini@tools", task_id=TASK, tier="standard",
                          judge_model="openai/fake-judge")
    assert report.status.value == "completed" and report.turns == 8
    assert report.stages.s1 == 1.0 and report.stages.s3 == 1.0 and report.stages.s2 is None
    assert "unparseable judge reply" in report.judge_errors["s2"]
    assert report.agentic is None and report.overall is None  # never a silent 0
    assert report.task_score is not None and report.task_score > 0.6
    assert report.input_tokens > 0 and report.cost_usd is not None and report.cost_usd > 0
    trace = Path(report.trace_url).parent
    for path in trace.iterdir():
        assert SECRET not in path.read_text()
    assert server.requests[0]["temperature"] == 0
