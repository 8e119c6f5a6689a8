"""Execute and score steps of the QA track."""

from __future__ import annotations

import time
from typing import cast
from uuid import UUID

from prefect import get_run_logger, task
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from pydantic import Field

from tasks_lib.agents import AgentSpec
from tasks_lib.caching import IO_RETRIES, cached
from tasks_lib.domain import Frozen, RunStatus, Tier
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import RunRow, ScoreRow
from tasks_lib.pricing import price_snapshot
from tasks_lib.qa.pool import load_pool
from tasks_lib.qa.runner import QAAnswer, known_sum, run_agent, run_id_for, total_cost
from tasks_lib.qa.scoring import EVALUATOR_VERSION, QAScoreCard, macro, score_answers
from tasks_lib.storage import Storage


class QARun(Frozen):
    """What execution recorded for one (agent, pool) run."""

    run_id: str = Field(description="Deterministic run id.")
    agent: AgentSpec = Field(description="Agent that ran.")
    pool_id: str = Field(description="Pool.")
    pool_version: int = Field(description="Pool version.")
    submission_url: str = Field(description="URL of answers.jsonl.")
    n_items: int = Field(description="Pool items.")
    n_answered: int = Field(description="Items answered.")
    input_tokens: float | None = Field(description="Total input tokens (None if unknown).")
    output_tokens: float | None = Field(description="Total output tokens (None if unknown).")
    cost_usd: float | None = Field(description="Total cost (None if any item's is unknown).")
    mean_time_s: float | None = Field(description="Mean seconds per answered item.")
    turns: int = Field(description="Model calls over all items.")
    wall_time_s: float = Field(description="Wall time of the execution.")


CARD_KEY = f"scores/{EVALUATOR_VERSION.replace('/', '-')}.json"
"""Where a run's QA score card is stored, below ``runs/<run_id>/``."""


@task(name="execute-agent", task_run_name="execute-{agent.agent_id}", **cached(**IO_RETRIES))
def execute_agent(agent: AgentSpec, pool_url: str, pool_hash: str, replicate: int = 0) -> QARun:
    """Run one agent over the pool's public view; store the submission and run summary."""
    pool = load_pool(Storage(pool_url))
    if pool.manifest.content_hash != pool_hash:
        raise ValueError(f"pool at {pool_url} changed: expected {pool_hash}")
    run_id = run_id_for(agent, pool_hash, replicate)
    logger = get_run_logger()
    progress_id: UUID | None = None
    if agent.harness != "qa_replay":
        progress_id = cast(UUID, create_progress_artifact(0.0, description=f"{agent.agent_id}"))

    def progress(done: int, total: int) -> None:
        if progress_id and (done % max(total // 20, 1) == 0 or done == total):
            update_progress_artifact(progress_id, 100.0 * done / total)
            logger.info("%s: %d/%d items", agent.agent_id, done, total)

    started = time.perf_counter()
    answers = run_agent(agent, pool.items, pool.exemplars, price_snapshot(), progress=progress)
    run_store = Storage.from_settings().child(f"runs/{run_id}")
    url = run_store.write_jsonl("submission/answers.jsonl", answers)
    total_time = known_sum(a.time_s for a in answers)
    run = QARun(
        run_id=run_id, agent=agent, pool_id=pool.manifest.pool_id,
        pool_version=pool.manifest.version, submission_url=url, n_items=len(pool.items),
        n_answered=len({a.key for a in answers}),
        input_tokens=known_sum(a.prompt_tokens for a in answers),
        output_tokens=known_sum(a.completion_tokens for a in answers),
        cost_usd=total_cost(answers),
        mean_time_s=None if total_time is None else total_time / len(answers),
        turns=sum(a.calls for a in answers), wall_time_s=time.perf_counter() - started,
    )
    run_store.write_json("run.json", run)
    return run


@task(name="record-run", task_run_name="record-run-{run.agent.agent_id}", **IO_RETRIES)
def record_run(run: QARun, replicate: int = 0) -> None:
    """Upsert the run's ledger row (never cached: a cache hit upstream still reaches the ledger)."""
    store.upsert_run(RunRow(
        run_id=run.run_id, agent_id=run.agent.agent_id, task_id=run.pool_id,
        tier=Tier.STANDARD.value, replicate=replicate, pool_id=run.pool_id,
        pool_version=run.pool_version, status=RunStatus.COMPLETED.value, n_items=run.n_items,
        turns=run.turns, wall_time_s=run.wall_time_s,
        input_tokens=None if run.input_tokens is None else int(run.input_tokens),
        output_tokens=None if run.output_tokens is None else int(run.output_tokens),
        cost_usd=run.cost_usd, submission_url=run.submission_url,
    ))


@task(name="score-run", task_run_name="score-{run.agent.agent_id}", **cached())
def score_run(run: QARun, pool_url: str, pool_hash: str) -> QAScoreCard:
    """Pass@1 per dataset from the stored submission; the card is stored beside the run."""
    pool = load_pool(Storage(pool_url))
    run_store = Storage.from_settings().child(f"runs/{run.run_id}")
    answers = [QAAnswer.model_validate(r) for r in run_store.read_jsonl("submission/answers.jsonl")]
    per_dataset, ignored = score_answers(answers, pool.references)
    card = QAScoreCard(
        run_id=run.run_id, agent_id=run.agent.agent_id, pool_id=run.pool_id,
        pool_version=run.pool_version, evaluator_version=EVALUATOR_VERSION,
        per_dataset=per_dataset, accuracy_macro=macro(per_dataset),
        coverage=run.n_answered / run.n_items if run.n_items else 0.0, ignored_answers=ignored,
    )
    run_store.write_json(CARD_KEY, card)
    return card


@task(name="record-score", task_run_name="record-score-{card.agent_id}", **IO_RETRIES)
def record_score(card: QAScoreCard) -> bool:
    """Append the score row (idempotent per run and evaluator version; never cached)."""
    url = Storage.from_settings().child(f"runs/{card.run_id}").url(CARD_KEY)
    return store.append_score(ScoreRow(
        run_id=card.run_id, evaluator_version=card.evaluator_version,
        task_score=card.accuracy_macro,
        metrics_json=store.dumps({ds: s.accuracy for ds, s in card.per_dataset.items()}),
        card_url=url,
    ))
