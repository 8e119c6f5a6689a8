"""AIDE (agents/aide: aideml 0.2.2, installed from the package index into the agent's own folder)
in research cells: ``aide@gpt-4o-mini`` on a challenge and on an imaging task, against the test
server behind the run's model proxy. AIDE's own loop drafts solution scripts, runs them in its
interpreter, asks for a review through function calling and keeps its best node; the wrapper
submits the best node's output. Each run is graded (the challenge placed on its human
leaderboard), metered (AIDE's calls are the run's tokens and cost), traced, and re-scores from
storage to the same card.

The test server plays the model: asked for code it answers with a plan and a script that runs the
kit's scripted baseline method writing into ``./working/submission/``; asked for a review (the
``submit_review`` tool) it reports a validation metric. The agent folder is the shipped one with
two search steps instead of twenty.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.cells import needs_bwrap
from support.openai_server import FakeOpenAIServer

from tasks_lib.settings import PROJECT_ROOT, reset_settings

CHALLENGE = "ldct-iqa"
IMAGING = "brain-tissue-seg"
AGENT = "aide@gpt-4o-mini"
PROVIDER_KEY = "sk-aide-agent-test-0123456789abcdef"
STEPS = 2


def _code() -> str:
    """The script the fake model writes: the kit's baseline method (challenge or imaging, by
    what the public view holds), its outputs redirected to AIDE's ``./working/submission``."""
    import tasks_lib.tracks.catalog  # noqa: F401  (registers the kits)
    from tasks_lib.tracks.base import kit_for

    challenge = kit_for("challenge").recipe()[1].replace("/workspace/submission",
                                                         "working/submission")
    imaging = kit_for("segmentation").recipe()[1].replace("/workspace/submission",
                                                          "working/submission")
    return (f"import os, runpy, sys\n"
            f"source = {challenge!r} if os.path.exists('/public/local_metric.py') else "
            f"{imaging!r}\n"
            "open('method.py', 'w').write(source)\n"
            "sys.argv = ['method.py']\n"
            "runpy.run_path('method.py', run_name='__main__')\n"
            "print('validation metric: 0.5')\n")


def _model(code: str) -> Any:
    def respond(body: dict[str, Any]) -> str | dict[str, Any]:
        if body.get("tools"):
            assert body["tools"][0]["function"]["name"] == "submit_review"
            args = {"is_bug": False, "summary": "Runs; validation metric 0.5.", "metric": 0.5,
                    "lower_is_better": False}
            return {"tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "submit_review", "arguments": json.dumps(args)}}]}
        return (f"Use the baseline method and check it on the validation data.\n\n"
                f"```python\n{code}```\n")
    return respond


@pytest.fixture
def aide(agents_dir: Path) -> Path:
    """The shipped agents/aide with {STEPS} search steps."""
    folder = agents_dir / "aide"
    shutil.copytree(PROJECT_ROOT / "agents" / "aide", folder)
    config = folder / "config.yaml"
    text = config.read_text()
    assert "max_steps: 20" in text
    config.write_text(text.replace("max_steps: 20", f"max_steps: {STEPS}"))
    return folder


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness", "aide")
@needs_bwrap
def test_aide_cells_on_a_challenge_and_an_imaging_task(
        seg_pool: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import flows.cli.challenge  # noqa: F401  (registers the command)
    from flows.cli.groups import app
    from flows.execute import run_cell
    from tasks_lib.harness.rescore import score_cell
    from tasks_lib.proxy import METER_FILE, ProxyMeter
    from tasks_lib.records import SUBMISSION, read_card, read_run, run_store

    built = CliRunner().invoke(app, ["pool", "build", "challenge", "--task", CHALLENGE, "--json"])
    assert built.exit_code == 0, built.stderr
    reports = {}
    with FakeOpenAIServer(_model(_code())) as provider:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", provider.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
        reset_settings()
        try:
            for task in (CHALLENGE, IMAGING):
                reports[task] = run_cell(agent_id=AGENT, task_id=task, tier="lite")
        finally:
            reset_settings()
    # Per step one code request and one review (tool) request, all through the proxy with the
    # provider key; AIDE named the provider model, the provider saw the run's model.
    assert len(provider.requests) == 2 * 2 * STEPS
    assert [bool(r.get("tools")) for r in provider.requests] == [False, True] * 2 * STEPS
    assert {r["model"] for r in provider.requests} == {"gpt-4o-mini"}
    assert all(h.get("Authorization", h.get("authorization")) == f"Bearer {PROVIDER_KEY}"
               for h in provider.headers)

    for task, report in reports.items():
        assert report.status.value == "completed" and report.violations == [], report.error
        assert report.stages.s4 == report.stages.s5 == 1.0, task
        record = read_run(report.run_id)
        meter = ProxyMeter.model_validate(run_store(report.run_id).read_json(METER_FILE))
        assert meter.total.calls == record.turns == 2 * STEPS
        assert (record.input_tokens, record.output_tokens, record.cost_usd) == (
            meter.total.prompt_tokens, meter.total.completion_tokens, meter.total.cost_usd)
        assert record.cost_usd and record.cost_usd > 0 and report.cost_usd == record.cost_usd
        # Traced: AIDE's steps in the agent's output, its journal and best solution kept.
        messages = json.loads(Path(report.conversation_url).read_text())["messages"]
        output = messages[-1]["content"]
        assert "step 1:" in output and f"step {STEPS}:" in output and "submitted node" in output
        assert PROVIDER_KEY not in Path(report.conversation_url).read_text()
        workspace = Path(run_store(report.run_id).root_path) / "workspace"
        journals = list(workspace.glob("aide/logs/*/journal.json"))
        assert len(journals) == 1 and len(json.loads(journals[0].read_text())["nodes"]) == STEPS
        assert list(workspace.glob("aide/logs/*/best_solution.py"))
        plan = Path(report.conversation_url).with_name("plan.md")
        assert plan.read_text().startswith("# Plan (AIDE's best node)")
        # Re-scored from storage alone: the same card.
        card = read_card(report.run_id, report.evaluator_version or "")
        again = score_cell(record, Path(run_store(report.run_id).root_path) / SUBMISSION)
        assert again.model_dump() == card.model_dump()

    # The challenge: the sample submission grades 0 and is placed below the human entries.
    challenge = read_card(reports[CHALLENGE].run_id, reports[CHALLENGE].evaluator_version or "")
    assert reports[CHALLENGE].metrics == {"score": 0.0}
    assert challenge.groups["positions"] == {"score": 7.0}
    # The imaging task: the multi-Otsu method's Dice, as the scripted baseline gets it.
    imaging = reports[IMAGING]
    assert imaging.task_score is not None and 0.3 < imaging.task_score <= 1.0


@pytest.mark.slow
@needs_bwrap
def test_aide_over_its_cost_budget_stops_at_once_and_ends_partial(
        agents_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget for a few exchanges (the proxy admits a call on its estimate, ~0.0005 USD
    here): the proxy then refuses a call with 429, which AIDE would retry forever; the wrapper
    ends the search there with the best submission so far, long before the wall clock, and
    the run is partial and scored."""
    from support.cells import file_env

    from tasks_lib.challenge.pool import publish_challenge_pool
    from tasks_lib.domain import RunStatus, Tier
    from tasks_lib.harness.cell import execute_cell, plan_cell
    from tasks_lib.harness.record import run_record
    from tasks_lib.harness.rescore import score_cell
    from tasks_lib.sandbox.base import SandboxBackend

    folder = agents_dir / "aide"
    shutil.copytree(PROJECT_ROOT / "agents" / "aide", folder)
    config = folder / "config.yaml"
    config.write_text(config.read_text().replace("max_cost_usd: 5.0", "max_cost_usd: 0.001"))
    url, _ = publish_challenge_pool(CHALLENGE, str(tmp_path / "pool"))
    env = file_env(CHALLENGE, Path(url), 3600)
    with FakeOpenAIServer(_model(_code())) as provider:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", provider.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
        reset_settings()
        plan = plan_cell(AGENT, env, Tier.LITE, SandboxBackend.LOCAL, 0, "rules")
        execution = execute_cell(plan, env)
    output = json.loads((plan.trace_dir / "conversation.json").read_text())["messages"][-1][
        "content"]
    assert execution.status is RunStatus.PARTIAL, (execution.status, output[-3000:])
    assert "the run's cost budget is spent" in output and execution.wall_time_s < 120
    assert 2 <= len(provider.requests) < 2 * 20
    record = run_record(plan, execution, env.pool())
    assert record.cost_usd is not None and record.cost_usd <= 0.001
    assert score_cell(record, plan.submission).metrics == {"score": 0.0}
