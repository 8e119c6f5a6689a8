"""Execute steps of the QA track: run an agent over a pool's public view, store the run.

A run is split into chunks of items (``MEDFLOWS_EXECUTE_CHUNK``), one Prefect task run each, so
agents × chunks spread over the task runner's workers (a Dask cluster when
``MEDFLOWS_DASK_ADDRESS`` is set); every worker shares the call cache through storage, so a chunk
retried elsewhere re-asks nothing. :func:`assemble_run` joins a run's chunks. Scoring is the one
score flow's (:mod:`tasks_lib.scoring`); this module stops at the stored submission
(``runs/<run_id>/submission/answers.jsonl``) and run record.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import Field

from evaluators.core import InputDataError
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.caching import IO_RETRIES, cached
from tasks_lib.domain import Frozen, RunStatus, Tier, Track
from tasks_lib.item_runner import RunLimits, StopReason
from tasks_lib.llm import CallOptions
from tasks_lib.pricing import price_snapshot
from tasks_lib.progress import publish
from tasks_lib.qa.pool import LoadedPool, load_pool
from tasks_lib.qa.runner import (
    QAAnswer,
    RunProgress,
    known_sum,
    run_agent,
    run_id_for,
    total_cost,
)
from tasks_lib.records import SUBMISSION, RunRecord, run_store
from tasks_lib.redaction import redact_model, secret_values
from tasks_lib.scoring import record_run
from tasks_lib.storage import Storage
from tasks_lib.tracks.qa import ANSWERS


def _redacted(answers: list[QAAnswer]) -> list[QAAnswer]:
    """Answers with secrets scrubbed from every text (raw reply, error, method trace) by the one
    redaction rule, before they leave the step as its result."""
    secrets = secret_values()
    return [redact_model(a, secrets) for a in answers]


class ChunkResult(Frozen):
    """What one execute task run produced: the answers of items ``start`` … ``stop − 1``."""

    run_id: str = Field(description="Run the chunk belongs to.")
    start: int = Field(description="First item index (pool order).")
    stop: int = Field(description="One past the last item index.")
    answers: list[QAAnswer] = Field(description="Answers in item order (unstarted items absent).")
    stopped: StopReason | None = Field(description="Why items were left unstarted, if any were.")
    run_cost_usd: float | None = Field(
        description="Cost of the run up to and including this chunk (when chained for a budget).")


class ChunkProgress(Frozen):
    """A progress report of one chunk (published to this process's listeners)."""

    run_id: str = Field(description="Run.")
    replicate: int = Field(description="Replicate.")
    start: int = Field(description="The chunk's first item index.")
    run_items: int = Field(description="Items of the whole run.")
    progress: RunProgress = Field(description="The chunk's own progress.")


@lru_cache(maxsize=2)
def _pool(pool_url: str, pool_hash: str) -> LoadedPool:
    pool = load_pool(Storage(pool_url))
    if pool.manifest.content_hash != pool_hash:
        raise InputDataError(pool_url, f"pool changed since planning: expected content hash "
                                       f"{pool_hash}")
    return pool


def _chunk_body(agent: AgentSpec, pool_url: str, pool_hash: str, replicate: int, start: int,
                stop: int, deadline_at: float | None, max_cost_usd: float | None,
                options: CallOptions, previous: ChunkResult | None) -> ChunkResult:
    run_id = run_id_for(agent, pool_hash, replicate)
    spent = previous.run_cost_usd if previous else 0.0
    if previous is not None and (previous.stopped is not None or spent is None):
        # An unknown spend cannot be checked against the cap: the run stops as if it were spent
        # (tasks_lib.item_runner), never silently short of items.
        return ChunkResult(run_id=run_id, start=start, stop=stop, answers=[],
                           stopped=previous.stopped or StopReason.BUDGET, run_cost_usd=spent)
    pool = _pool(pool_url, pool_hash)
    items = pool.items[start:stop]
    deadline = None if deadline_at is None else time.monotonic() + (deadline_at - time.time())
    limits = RunLimits(deadline=deadline, max_cost_usd=max_cost_usd, spent_usd=spent or 0.0)

    def progress(report: RunProgress) -> None:
        publish(ChunkProgress(run_id=run_id, replicate=replicate, start=start,
                              run_items=len(pool.items), progress=report))

    batch = run_agent(agent, items, pool.exemplars, price_snapshot(), progress=progress,
                      limits=limits, options=options, replicate=replicate)
    answers = _redacted(batch.answers)
    return ChunkResult(run_id=run_id, start=start, stop=stop, answers=answers,
                       stopped=batch.stopped,
                       run_cost_usd=known_sum([spent, *(a.cost_usd for a in answers)]))


CHUNK_MODULES = ("tasks_lib.qa.pool", "tasks_lib.qa.runner", "tasks_lib.item_runner",
                 "tasks_lib.qa.methods",
                 "tasks_lib.qa.method_base", "tasks_lib.qa.medagents", "tasks_lib.qa.mdagents",
                 "tasks_lib.qa.predictions", "tasks_lib.qa.types", "evaluators.qa",
                 "tasks_lib.llm", "tasks_lib.llm_cache", "tasks_lib.llm_limits",
                 "tasks_lib.llm_scope", "tasks_lib.agents", "tasks_lib.pricing",
                 "tasks_lib.redaction")


@task(name="execute-chunk", task_run_name="execute-{agent.agent_id}-r{replicate}-{start}",
      **cached(modules=CHUNK_MODULES, settings_files=("price_snapshot",), **IO_RETRIES))
def execute_chunk(agent: AgentSpec, pool_url: str, pool_hash: str, replicate: int, start: int,
                  stop: int, deadline_at: float | None = None, max_cost_usd: float | None = None,
                  options: CallOptions | None = None,
                  previous: ChunkResult | None = None) -> ChunkResult:
    """Ask (or replay) items ``start`` … ``stop − 1`` of the pool's public view.

    Live agents resume through the call cache, so this step is not result-cached for them (see
    :func:`chunk_step`): a retried or re-run chunk asks the provider only what it never answered.
    ``deadline_at`` is a ``time.time()`` instant; ``previous`` (the run's preceding chunk, given
    only when a cost budget chains the chunks) carries the run's spend so far.
    """
    return _chunk_body(agent, pool_url, pool_hash, replicate, start, stop, deadline_at,
                       max_cost_usd, options or CallOptions(), previous)


def chunk_step(agent: AgentSpec) -> Any:
    """The execute step for ``agent``: result-cached for replays (deterministic), not for live
    agents (the call cache resumes them, and a re-run must retry items that errored)."""
    if agent.harness is Harness.QA_REPLAY:
        return execute_chunk
    return execute_chunk.with_options(cache_policy=NO_CACHE, persist_result=False)


@task(name="assemble-run", task_run_name="assemble-{agent.agent_id}-r{replicate}",
      **cached(modules=("tasks_lib.qa.runner", "tasks_lib.records", "tasks_lib.storage"),
               ignore_inputs=("started_at",), **IO_RETRIES))
def assemble_run(agent: AgentSpec, pool_url: str, pool_hash: str, replicate: int,
                 chunks: list[ChunkResult], started_at: float, tier: Tier = Tier.STANDARD,
                 time_budget_s: int | None = None, max_cost_usd: float | None = None
                 ) -> RunRecord:
    """Join a run's chunks into its submission (``answers.jsonl``, pool order) and run record.

    Result-cached on the chunks: the same replayed answers are not written again on a re-run
    (live chunks differ in timings and cache hits, so a live run is always re-assembled)."""
    pool = _pool(pool_url, pool_hash)
    run_id = run_id_for(agent, pool_hash, replicate)
    answers = [a for c in sorted(chunks, key=lambda c: c.start) for a in c.answers]
    run_store(run_id).write_jsonl(f"{SUBMISSION}/{ANSWERS}", answers)
    stops = {c.stopped for c in chunks} - {None}
    status, error = RunStatus.COMPLETED, None
    if StopReason.TIME in stops:
        status, error = RunStatus.TIMEOUT, f"time budget of {time_budget_s} s exhausted"
    elif StopReason.BUDGET in stops:
        status = RunStatus.PARTIAL
        spent = "spent" if total_cost(answers) is not None else "no longer checkable (an item's " \
            "cost is unknown: unpriced model)"
        error = (f"cost budget of ${max_cost_usd:g} {spent} after {len(answers)} of "
                 f"{len(pool.items)} items (re-run with a larger --max-cost-usd to resume)")
    item_time = known_sum(a.time_s for a in answers)
    live = agent.harness is not Harness.QA_REPLAY
    return RunRecord(
        run_id=run_id, agent=agent, task_id=pool.manifest.pool_id, track=Track.QA, tier=tier,
        replicate=replicate, status=status, pool_url=pool_url, pool_id=pool.manifest.pool_id,
        pool_version=pool.manifest.version, pool_hash=pool_hash, n_items=len(pool.items),
        n_answered=len({a.key for a in answers if a.error is None}),
        turns=sum(a.calls for a in answers), wall_time_s=time.time() - started_at,
        item_time_s=None if item_time is None or not answers else item_time / len(answers),
        input_tokens=_int(known_sum(a.prompt_tokens for a in answers)),
        output_tokens=_int(known_sum(a.completion_tokens for a in answers)),
        cost_usd=total_cost(answers),
        new_cost_usd=known_sum(a.new_cost_usd for a in answers) if live else None,
        cache_hits=sum(a.cache_hits for a in answers) if live else None,
        error=error)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


@task(name="record-run", task_run_name="record-run-{run.agent.agent_id}", **IO_RETRIES)
def record_run_step(run: RunRecord) -> None:
    """Store run.json and upsert the ledger row (never cached: a cache hit upstream still
    reaches a new ledger)."""
    record_run(run)
