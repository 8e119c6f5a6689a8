"""An external agent (agents/example-llm) in a research cell on a challenge pool: run once in the
bubblewrap sandbox behind the run's model proxy, it is graded and placed on the leaderboard, its
model calls (and only those) reach the provider through the proxy and are the run's tokens and
cost, its output is in the trace, and the run re-scores from storage to the same card. An agent
past its wall-clock cap is killed, ends ``timeout``, and what it wrote is scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cells import file_env, needs_bwrap
from support.openai_server import FakeOpenAIServer

from tasks_lib.settings import reset_settings

CHALLENGE = "ldct-iqa"
AGENT = "external:example-llm@gpt-4o-mini"
PROVIDER_KEY = "sk-external-agent-test-0123456789abcdef"
PLAN = "Copy the sample submission and check its columns."


def _plan(body: dict[str, Any]) -> str:
    return PLAN


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
@needs_bwrap
def test_external_agent_cell_is_graded_metered_and_rescored(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import flows.cli.challenge  # noqa: F401  (registers the command)
    from flows.cli.groups import app
    from flows.execute import run_cell
    from tasks_lib.harness.rescore import score_cell
    from tasks_lib.proxy import METER_FILE, ProxyMeter
    from tasks_lib.records import SUBMISSION, read_card, read_run, run_store

    built = CliRunner().invoke(app, ["pool", "build", "challenge", "--task", CHALLENGE, "--json"])
    assert built.exit_code == 0, built.stderr
    with FakeOpenAIServer(_plan) as provider:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", provider.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
        reset_settings()
        try:
            report = run_cell(agent_id=AGENT, task_id=CHALLENGE, tier="lite")
        finally:
            reset_settings()

    # Graded and placed: the sample submission (quality 0 everywhere) grades 0, below all six
    # human entries.
    assert report.status.value == "completed" and report.violations == [], report.error
    assert report.metrics == {"score": 0.0} and report.stages.s4 == report.stages.s5 == 1.0
    run_card = read_card(report.run_id, report.evaluator_version or "")
    assert run_card.groups["positions"] == {"score": 7.0}
    assert report.task_score == run_card.groups["leaderboard"]["percentile"]
    assert any(n.startswith("leaderboard percentile") for n in report.notes)

    # Metered: the provider saw exactly the proxy's one call, with the provider key, never the
    # proxy token; the meter is the run's turns, tokens and cost.
    meter = ProxyMeter.model_validate(run_store(report.run_id).read_json(METER_FILE))
    assert meter.total.calls == len(provider.requests) == 1
    headers = {k.lower(): v for k, v in provider.headers[0].items()}
    assert headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert "How this run works" in provider.requests[0]["messages"][1]["content"]
    record = read_run(report.run_id)
    assert (record.turns, record.input_tokens, record.output_tokens, record.cost_usd) == (
        1, meter.total.prompt_tokens, meter.total.completion_tokens, meter.total.cost_usd)
    assert record.input_tokens and record.cost_usd and record.cost_usd > 0
    assert report.cost_usd == record.cost_usd and record.end == "submitted"
    # per stage: the agent told the proxy S1 before its call and S5 before submitting
    assert list(record.telemetry) == ["unattributed", "s1", "s5"]
    assert (record.telemetry["s1"].model_calls, record.telemetry["s1"].cost_usd) == (
        1, record.cost_usd)
    assert record.telemetry["s5"].model_calls == record.telemetry["unattributed"].model_calls == 0

    # Traced: the agent's output and the proxy's calls.
    trace = Path(report.conversation_url)
    messages = json.loads(trace.read_text())["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    assert f"model: {PLAN}" in messages[2]["content"]
    assert "submitted: ['submission.csv']" in messages[2]["content"]
    events = [json.loads(line) for line in Path(report.trace_url).read_text().splitlines()]
    calls = [e["detail"] for e in events if e["kind"] == "model_turn"]
    assert [(c["model"], c["provider_model"], c["via"], c["outcome"]) for c in calls] == [
        ("gpt-4o-mini", "openai/gpt-4o-mini", "proxy", "answered")]
    assert (calls[0]["prompt_tokens"], calls[0]["cost_usd"]) == (
        meter.total.prompt_tokens, meter.total.cost_usd)
    assert PROVIDER_KEY not in trace.read_text()
    assert (trace.parent / "plan.md").read_text() == f"# Plan\n\n{PLAN}\n"

    # Re-scored from storage alone: the same card.
    folder = Path(run_store(report.run_id).root_path)
    again = score_cell(read_run(report.run_id), folder / SUBMISSION)
    assert again.model_dump() == run_card.model_dump()


def test_an_external_agent_id_names_a_folder_and_one_of_its_models() -> None:
    from tasks_lib.agents import Harness, resolve_agent
    from tasks_lib.errors import InputDataError

    agent = resolve_agent(AGENT)
    assert (agent.harness, agent.model, agent.method, agent.params) == (
        Harness.EXTERNAL, "openai/gpt-4o-mini", "example-llm", {"model_alias": "gpt-4o-mini"})
    with pytest.raises(InputDataError, match="one of: gpt-4o-mini"):
        resolve_agent("external:example-llm@gpt-5")
    with pytest.raises(InputDataError, match="known: aide, example-llm"):
        resolve_agent("external:../datasets@gpt-4o-mini")
    assert resolve_agent("scripted-baseline").harness is Harness.SCRIPTED
    aide = resolve_agent("aide@gpt-4o-mini")  # no prefix: no catalog id, an agents/ folder
    assert (aide.harness, aide.method, aide.params) == (
        Harness.EXTERNAL, "aide", {"model_alias": "gpt-4o-mini", "max_turns": 20})


@pytest.mark.parametrize(("image", "error"), [
    ("image: {tag: a:1, tarball: r.tar}", "exactly one of 'tag' and 'tarball'"),
    ("image: {tarball: ../r.tar}", "a path inside the agent's folder"),
    ("image: {tag: a:1, python: python3}", "an absolute path inside the image"),
    ("image: {tag: a:1}\npackages: {pip: [x==1]}", "give 'image' or 'packages', not both"),
])
def test_an_agent_image_config_is_checked(agents_dir: Path, image: str, error: str) -> None:
    from tasks_lib.agents import resolve_agent
    from tasks_lib.errors import InputDataError

    (agents_dir / "boxed").mkdir()
    (agents_dir / "boxed" / "config.yaml").write_text(
        f"command: python3 a.py\nmodels: {{m: openai/gpt-4o-mini}}\n{image}\n")
    with pytest.raises(InputDataError, match=error):
        resolve_agent("boxed@m")


def test_an_agent_image_tarball_must_be_in_its_folder(agents_dir: Path) -> None:
    from tasks_lib.errors import InputDataError
    from tasks_lib.harness.external import external_image
    from tasks_lib.sandbox.base import ContainerImage, SandboxBackend

    (agents_dir / "boxed").mkdir()
    (agents_dir / "boxed" / "config.yaml").write_text(
        "command: python3 a.py\nmodels: {m: openai/gpt-4o-mini}\nimage: {tarball: r.tar}\n")
    with pytest.raises(InputDataError, match=r"image\.tarball: no such file"):
        external_image("boxed", SandboxBackend.DOCKER)
    with pytest.raises(InputDataError, match="runs on --sandbox docker"):
        external_image("boxed", SandboxBackend.LOCAL)
    (agents_dir / "boxed" / "r.tar").write_bytes(b"x")
    assert external_image("boxed", SandboxBackend.DOCKER) == ContainerImage(
        tarball=(agents_dir / "boxed" / "r.tar").resolve())


def test_run_agents_lists_catalog_and_external_agents() -> None:
    from typer.testing import CliRunner

    import flows.cli.run  # noqa: F401  (registers the command)
    from flows.cli.groups import app

    out = CliRunner().invoke(app, ["run", "agents", "--json"])
    assert out.exit_code == 0, out.output
    agents = {a["agent_id"]: a for a in json.loads(out.stdout)}
    assert agents["scripted-baseline"]["harness"] == "scripted"
    assert agents["gpt-4o-mini@tools"]["harness"] == "tool_loop"
    aide = agents["aide@gpt-4o-mini"]
    assert (aide["harness"], aide["model"], aide["budget"]) == (
        "external", "openai/gpt-4o-mini", {"max_cost_usd": 5.0, "max_steps": 20})
    assert "aideml==0.2.2" in aide["packages"] and "example-llm@gpt-4o-mini" in agents
    assert not any(a["harness"] in ("qa_method", "qa_replay") for a in agents.values())


SLEEPER = """command: >-
  mkdir -p "$MEDFLOWS_SUBMISSION" &&
  cp "$MEDFLOWS_PUBLIC/sample_submission/submission.csv" "$MEDFLOWS_SUBMISSION/" &&
  echo "partial written" && sleep 600
models: {gpt-4o-mini: openai/gpt-4o-mini}
budget: {wall_time_s: 3}
"""


@pytest.mark.slow
@needs_bwrap
def test_an_agent_past_its_wall_clock_ends_timeout_and_what_it_wrote_is_scored(
        tmp_path: Path, agents_dir: Path) -> None:
    from tasks_lib.challenge.pool import publish_challenge_pool
    from tasks_lib.domain import RunStatus, Tier
    from tasks_lib.harness.cell import execute_cell, plan_cell
    from tasks_lib.harness.loop import LoopEnd
    from tasks_lib.harness.record import run_record
    from tasks_lib.harness.rescore import score_cell
    from tasks_lib.sandbox.base import SandboxBackend

    (agents_dir / "sleeper").mkdir()
    (agents_dir / "sleeper" / "config.yaml").write_text(SLEEPER)
    url, _ = publish_challenge_pool(CHALLENGE, str(tmp_path / "pool"))
    env = file_env(CHALLENGE, Path(url), 120)
    plan = plan_cell("external:sleeper@gpt-4o-mini", env, Tier.LITE, SandboxBackend.LOCAL, 0,
                     "rules")
    execution = execute_cell(plan, env)
    assert (execution.status, execution.end) == (RunStatus.TIMEOUT, LoopEnd.TIMEOUT)
    assert 3 <= execution.wall_time_s < 60
    assert "partial written" in (plan.trace_dir / "conversation.json").read_text()
    record = run_record(plan, execution, env.pool())
    assert (record.status, record.turns, record.cost_usd) == (RunStatus.TIMEOUT, 0, 0.0)
    card = score_cell(record, plan.submission)
    assert card.metrics == {"score": 0.0} and card.s5 == 1.0


SPENDER = """command: python agent.py
models: {gpt-4o-mini: openai/gpt-4o-mini}
budget: {max_cost_usd: 0.00001}
"""
SPENDER_AGENT = """import os, shutil, openai
shutil.copytree(os.path.join(os.environ["MEDFLOWS_PUBLIC"], "sample_submission"),
                os.environ["MEDFLOWS_SUBMISSION"])
print("partial written", flush=True)
client = openai.OpenAI()
for i in range(200):
    try:
        client.chat.completions.create(model=os.environ["MEDFLOWS_MODEL"], max_tokens=4,
                                       messages=[{"role": "user", "content": f"call {i}"}])
    except openai.RateLimitError as exc:
        print(f"refused after {i} calls: {exc.code}", flush=True)
        raise SystemExit(3)
"""


@pytest.mark.slow
@needs_bwrap
def test_an_agent_over_its_cost_budget_ends_partial_and_what_it_wrote_is_scored(
        tmp_path: Path, agents_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks_lib.challenge.pool import publish_challenge_pool
    from tasks_lib.domain import RunStatus, Tier
    from tasks_lib.harness.cell import execute_cell, plan_cell
    from tasks_lib.harness.record import run_record
    from tasks_lib.harness.rescore import score_cell
    from tasks_lib.pricing import price_snapshot
    from tasks_lib.sandbox.base import SandboxBackend

    (agents_dir / "spender").mkdir()
    (agents_dir / "spender" / "config.yaml").write_text(SPENDER)
    (agents_dir / "spender" / "agent.py").write_text(SPENDER_AGENT)
    url, _ = publish_challenge_pool(CHALLENGE, str(tmp_path / "pool"))
    env = file_env(CHALLENGE, Path(url), 120)
    with FakeOpenAIServer(_plan) as provider:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", provider.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
        reset_settings()
        plan = plan_cell("spender@gpt-4o-mini", env, Tier.LITE, SandboxBackend.LOCAL, 0,
                         "rules")
        execution = execute_cell(plan, env)
    assert (execution.status, execution.error) == (RunStatus.PARTIAL,
                                                   "the run's model budget was spent")
    output = (plan.trace_dir / "conversation.json").read_text()
    assert "partial written" in output and "insufficient_quota" in output
    record = run_record(plan, execution, env.pool())
    assert record.status is RunStatus.PARTIAL and record.turns == len(provider.requests) > 0
    events = [json.loads(line) for line in (plan.trace_dir / "trace.jsonl").read_text()
              .splitlines()]
    outcomes = [e["detail"]["outcome"] for e in events if e["kind"] == "model_turn"]
    assert outcomes == ["answered"] * record.turns + ["refused_budget"]
    assert record.limits == {"wall_time_s": 120, "max_steps": 30, "exec_timeout_s": 120,
                             "max_cost_usd": 0.00001}
    # The cap is checked on each call's estimate before it is sent (docs/proxy.md): the last
    # admitted call may pass it by its estimation error, no further call is sent.
    last = price_snapshot().cost("gpt-4o-mini", 20, 4)
    assert record.cost_usd is not None and last is not None
    assert 0 < record.cost_usd <= 0.00001 + last
    card = score_cell(record, plan.submission)
    assert card.metrics == {"score": 0.0} and card.s5 == 1.0
