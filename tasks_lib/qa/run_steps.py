"""Execute steps of the QA track: run an agent over a pool's public view, store the run.

Scoring is the one score flow's (:mod:`tasks_lib.scoring`); this module stops at the stored
submission (``runs/<run_id>/submission/answers.jsonl``) and run record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast
from uuid import UUID

from prefect import get_run_logger, task
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from evaluators.core import InputDataError
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.caching import IO_RETRIES, cached
from tasks_lib.domain import RunStatus, Tier, Track
from tasks_lib.pricing import price_snapshot
from tasks_lib.qa.pool import load_pool
from tasks_lib.qa.runner import QAAnswer, known_sum, run_agent, run_id_for, total_cost
from tasks_lib.records import SUBMISSION, RunRecord, run_store
from tasks_lib.redaction import redact, secret_values
from tasks_lib.scoring import record_run
from tasks_lib.storage import Storage
from tasks_lib.tracks.qa import ANSWERS


def _redacted(answers: list[QAAnswer]) -> list[QAAnswer]:
    """Answers with secrets scrubbed from the model's raw text (the one redaction rule)."""
    secrets = secret_values()
    return [a if a.raw is None else a.model_copy(update={"raw": redact(a.raw, secrets)})
            for a in answers]


def _progress(agent: AgentSpec) -> Callable[[int, int], None]:
    logger = get_run_logger()
    progress_id: UUID | None = None
    if agent.harness is not Harness.QA_REPLAY:
        progress_id = cast(UUID, create_progress_artifact(0.0, description=f"{agent.agent_id}"))

    def progress(done: int, total: int) -> None:
        if progress_id and (done % max(total // 20, 1) == 0 or done == total):
            update_progress_artifact(progress_id, 100.0 * done / total)
            logger.info("%s: %d/%d items", agent.agent_id, done, total)

    return progress


@task(name="execute-agent", task_run_name="execute-{agent.agent_id}-r{replicate}", **cached(
    modules=("tasks_lib.qa.pool", "tasks_lib.qa.runner", "tasks_lib.qa.methods",
             "tasks_lib.qa.predictions", "tasks_lib.qa.types", "evaluators.qa", "tasks_lib.llm",
             "tasks_lib.llm_cache",
             "tasks_lib.agents", "tasks_lib.pricing", "tasks_lib.records", "tasks_lib.redaction"),
    settings_files=("price_snapshot",), **IO_RETRIES))
def execute_agent(agent: AgentSpec, pool_url: str, pool_hash: str, replicate: int = 0,
                  tier: Tier = Tier.STANDARD, time_budget_s: int | None = None) -> RunRecord:
    """Run one agent over the pool's public view (within the time budget); store the
    submission and the run record."""
    pool = load_pool(Storage(pool_url))
    if pool.manifest.content_hash != pool_hash:
        raise InputDataError(pool_url, f"pool changed since planning: expected content hash "
                                       f"{pool_hash}")
    run_id = run_id_for(agent, pool_hash, replicate)
    progress = _progress(agent)
    started = time.perf_counter()
    deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
    answers = _redacted(run_agent(agent, pool.items, pool.exemplars, price_snapshot(),
                                  progress=progress, deadline=deadline))
    wall = time.perf_counter() - started
    run_store(run_id).write_jsonl(f"{SUBMISSION}/{ANSWERS}", answers)
    timed_out = deadline is not None and len(answers) < len(pool.items) \
        and time.monotonic() > deadline
    item_time = known_sum(a.time_s for a in answers)
    return RunRecord(
        run_id=run_id, agent=agent, task_id=pool.manifest.pool_id, track=Track.QA, tier=tier,
        replicate=replicate, status=RunStatus.TIMEOUT if timed_out else RunStatus.COMPLETED,
        pool_url=pool_url, pool_id=pool.manifest.pool_id, pool_version=pool.manifest.version,
        pool_hash=pool_hash, n_items=len(pool.items),
        n_answered=len({a.key for a in answers if a.error is None}),
        turns=sum(a.calls for a in answers), wall_time_s=wall,
        item_time_s=None if item_time is None or not answers else item_time / len(answers),
        input_tokens=_int(known_sum(a.prompt_tokens for a in answers)),
        output_tokens=_int(known_sum(a.completion_tokens for a in answers)),
        cost_usd=total_cost(answers),
        error=f"time budget of {time_budget_s} s exhausted" if timed_out else None)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


@task(name="record-run", task_run_name="record-run-{run.agent.agent_id}", **IO_RETRIES)
def record_run_step(run: RunRecord) -> None:
    """Store run.json and upsert the ledger row (never cached: a cache hit upstream still
    reaches a new ledger)."""
    record_run(run)
