"""A live QA agent's run record: the time budget caps the run (status timeout, the rest of the
items unanswered, the reason recorded), replicates are recorded, and the stored raw model text
is redacted like every run output."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.openai_server import FakeOpenAIServer

from evaluators.core import RunStatus, Tier
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.records import SUBMISSION, run_store

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _pool(tmp_path: Path) -> tuple[str, str]:
    from tasks_lib.qa import steps
    from tasks_lib.qa.replay_report import default_source
    from tasks_lib.qa.review import auto_record

    src = steps.resolve_card.fn("medqa", default_source())
    ingested = steps.ingest.fn("medqa", src.questions, src.questions_digest)
    build = steps.DatasetBuild("medqa", ingested.n_lines, ingested.items[:6], [], [], [], [])
    published = steps.publish_pool.fn("timecap", str(tmp_path / "pool"), [build], [],
                                      auto_record([]), {"rule": "first"})
    return published.url, published.manifest.content_hash


def test_time_budget_ends_the_run_as_timeout(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect import flow

    from tasks_lib.qa.run_steps import execute_agent

    secret = "sk-test-" + "x" * 24
    monkeypatch.setenv("OPENAI_API_KEY", secret)

    def responder(body: dict) -> str:  # type: ignore[type-arg]
        time.sleep(0.4)
        return f"The answer is A. (key {secret})"

    pool, digest = _pool(tmp_path)
    with FakeOpenAIServer(responder) as srv:
        agent = AgentSpec(agent_id="slow@zero_shot", harness=Harness.QA_METHOD,
                          model="openai/slow", method="zero_shot",
                          params={"api_base": srv.base_url, "max_connections": 1})

        @flow
        def run_both() -> tuple[object, object]:
            capped = execute_agent(agent, pool, digest, 0, Tier.STANDARD, 1)
            free = execute_agent(agent, pool, digest, 1, Tier.STANDARD, 600)
            return capped, free

        capped, free = run_both()
    assert capped.status is RunStatus.TIMEOUT and capped.replicate == 0  # type: ignore[attr-defined]
    assert 0 < capped.n_answered < 6 and "time budget" in capped.error  # type: ignore[attr-defined]
    assert free.status is RunStatus.COMPLETED and free.n_answered == 6  # type: ignore[attr-defined]
    assert free.replicate == 1  # type: ignore[attr-defined]
    stored = run_store(free.run_id).read_text(f"{SUBMISSION}/answers.jsonl")  # type: ignore[attr-defined]
    assert secret not in stored and "[REDACTED]" in stored
