"""A live QA agent's run record: the time budget caps the run (status timeout, the rest of the
items unanswered, the reason recorded), replicates are recorded, and the stored raw model text
is redacted like every run output."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.openai_server import FakeOpenAIServer

from evaluators.core import RunStatus
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.records import SUBMISSION, RunRecord, run_store
from tasks_lib.settings import reset_settings

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _pool(tmp_path: Path) -> tuple[str, str]:
    from tasks_lib.qa import steps
    from tasks_lib.qa.ingest import default_source
    from tasks_lib.qa.review import auto_record

    src = steps.resolve_card.fn("medqa", default_source())
    ingested = steps.ingest.fn("medqa", src.questions, src.questions_digest)
    build = steps.DatasetBuild("medqa", ingested.n_lines, ingested.items[:6], [], [], [], [])
    published = steps.publish_pool.fn("timecap", str(tmp_path / "pool"), [build], [],
                                      auto_record([]), {"rule": "first"})
    return published.url, published.manifest.content_hash


def _execute(agent: AgentSpec, pool: str, digest: str, replicate: int,
             time_budget_s: int | None = None, max_cost_usd: float | None = None,
             chunk: int = 6) -> RunRecord:
    """One run through the execute steps (chunks chained as the flow chains them for a budget),
    inside a flow."""
    from prefect import flow

    from tasks_lib.execution.environment import Budgets
    from tasks_lib.execution.steps import assemble_run, chunk_step
    from tasks_lib.qa.run_steps import QAEnvironment

    env = QAEnvironment.open(pool)
    assert env.pool_hash == digest

    @flow
    def run() -> RunRecord:
        started = time.time()
        deadline = None if time_budget_s is None else started + time_budget_s
        chunks, previous = [], None
        for start in range(0, 6, chunk):
            previous = chunk_step(env, agent)(env, agent, replicate, start, start + chunk,
                                              deadline, max_cost_usd, None, previous)
            chunks.append(previous)
        return assemble_run(env, agent, replicate, chunks, started,
                            Budgets(time_budget_s, max_cost_usd))

    return run()


def test_time_budget_ends_the_run_as_timeout(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-" + "x" * 24
    monkeypatch.setenv("OPENAI_API_KEY", secret)

    def responder(body: dict) -> str:  # type: ignore[type-arg]
        time.sleep(0.4)
        return f"The answer is A. (key {secret})"

    pool, digest = _pool(tmp_path)
    with FakeOpenAIServer(responder) as srv:
        agent = AgentSpec(agent_id="slow@zero_shot", harness=Harness.QA_METHOD,
                          model="openai/slow", method="zero_shot",
                          params={"api_base": srv.base_url, "max_connections": 1,
                                  "extractor": "regex"})
        capped = _execute(agent, pool, digest, 0, time_budget_s=1)
        free = _execute(agent, pool, digest, 1, time_budget_s=600)
    assert capped.status is RunStatus.TIMEOUT and capped.replicate == 0
    assert capped.n_answered is not None and 0 < capped.n_answered < 6
    assert capped.error is not None and "time budget" in capped.error
    assert free.status is RunStatus.COMPLETED and free.n_answered == 6
    assert free.replicate == 1
    stored = run_store(free.run_id).read_text(f"{SUBMISSION}/answers.jsonl")
    assert secret not in stored and "[REDACTED]" in stored


def test_cost_budget_stops_a_run_partial_and_a_larger_budget_resumes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gpt-4o-mini is priced in the snapshot: a budget of items 1–2 plus half of item 3 stops
    after 3 items (the third starts below the budget; items start one at a time here); re-running
    with a larger budget asks only the 3 missing items (the rest come from the call cache,
    free). Every item is 2 requests: the zero-shot call and the paper's extractor call (priced at
    the extractor model, gpt-4o-mini too)."""
    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
    monkeypatch.setenv("MEDFLOWS_LLM_CACHE", "true")
    reset_settings()
    pool, digest = _pool(tmp_path)
    def responder(body: dict) -> str:  # type: ignore[type-arg]
        if "response_format" in body:  # the extractor
            return '{"answer_idx": "A"}'
        question = str(body["messages"][-1]["content"]).split("Question:\n")[1][:40]
        return f"The answer is (A): {question}"  # item-specific, so is its extractor request

    with FakeOpenAIServer(responder) as srv:
        agent = AgentSpec(agent_id="mini@zero_shot", harness=Harness.QA_METHOD,
                          model="openai/gpt-4o-mini", method="zero_shot",
                          params={"api_base": srv.base_url, "max_connections": 1})
        whole = _execute(agent, pool, digest, 0, max_cost_usd=1.0)  # a budget never reached
        costs = [a["cost_usd"] for a in
                 run_store(whole.run_id).read_jsonl(f"{SUBMISSION}/answers.jsonl")]
        assert len(costs) == 6 and min(costs) > 0 and len(srv.requests) == 2 * 6
        budget = costs[0] + costs[1] + costs[2] / 2
        capped = _execute(agent, pool, digest, 1, max_cost_usd=budget, chunk=2)
        assert capped.status is RunStatus.PARTIAL and capped.n_answered == 3
        assert capped.error is not None and "--max-cost-usd" in capped.error
        assert len(srv.requests) == 2 * (6 + 3)
        resumed = _execute(agent, pool, digest, 1, max_cost_usd=1.0, chunk=2)
    assert resumed.status is RunStatus.COMPLETED and resumed.n_answered == 6
    assert resumed.run_id == capped.run_id and len(srv.requests) == 2 * (6 + 6)
    assert resumed.cache_hits == 2 * 3
    assert resumed.new_cost_usd == pytest.approx(sum(costs[3:]))
    assert resumed.cost_usd == pytest.approx(whole.cost_usd)
    reset_settings()
