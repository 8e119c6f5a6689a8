"""The QA kit's item environment: QA agents (live methods, recorded replays) on a pool's
public view, on the one execute path (:mod:`tasks_lib.execution`).

A chunk runs the agent over items ``start`` … ``stop − 1`` in pool order (replays are one
result-cached chunk); :meth:`QAEnvironment.assemble` writes
``runs/<run_id>/submission/answers.jsonl`` and the run record. Scoring is the one score flow's.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import ClassVar

from pydantic import Field

from evaluators.core import InputDataError
from tasks_lib import pool_format
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.domain import Frozen, RunStatus, Tier, Track
from tasks_lib.execution.environment import Budgets, ChunkResult, ItemEnvironment
from tasks_lib.item_runner import RunLimits, StopReason
from tasks_lib.llm import CallOptions
from tasks_lib.pricing import price_snapshot
from tasks_lib.progress import publish
from tasks_lib.qa.pool import LoadedPool, load_pool
from tasks_lib.qa.runner import (
    ANSWERS,
    QAAnswer,
    RunProgress,
    known_sum,
    run_agent,
    total_cost,
)
from tasks_lib.qa.types import PoolManifest
from tasks_lib.records import SUBMISSION, RunRecord, run_store
from tasks_lib.redaction import redact_model, secret_values
from tasks_lib.storage import Storage


def _redacted(answers: list[QAAnswer]) -> list[QAAnswer]:
    """Answers with secrets scrubbed from every text (raw reply, error, method trace) by the one
    redaction rule, before they leave the step as its result."""
    secrets = secret_values()
    return [redact_model(a, secrets) for a in answers]


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


CHUNK_MODULES = ("tasks_lib.qa.run_steps", "tasks_lib.qa.pool", "tasks_lib.qa.runner",
                 "tasks_lib.item_runner", "tasks_lib.qa.methods",
                 "tasks_lib.qa.method_base", "tasks_lib.qa.method_variants",
                 "tasks_lib.qa.medagents", "tasks_lib.qa.mdagents",
                 "tasks_lib.qa.predictions", "tasks_lib.qa.types", "evaluators.qa",
                 "tasks_lib.llm", "tasks_lib.llm_cache", "tasks_lib.llm_limits",
                 "tasks_lib.llm_scope", "tasks_lib.agents", "tasks_lib.pricing",
                 "tasks_lib.redaction")


class QAEnvironment(ItemEnvironment):
    """A QA pool's public view for item agents (live methods and recorded replays); a run's
    items are the pool's order, its submission ``answers.jsonl``."""

    cache_modules: ClassVar[tuple[str, ...]] = CHUNK_MODULES
    cache_settings: ClassVar[tuple[str, ...]] = ("price_snapshot",)

    @classmethod
    def open(cls, pool_url: str) -> QAEnvironment:
        """The environment of the QA pool at ``pool_url``."""
        manifest = pool_format.read_manifest(pool_url, PoolManifest)
        return cls(pool_url=pool_url, pool_id=manifest.pool_id, pool_version=manifest.version,
                   pool_hash=manifest.content_hash,
                   n_items=sum(d.n_items for d in manifest.datasets.values()))

    def replayed(self, agent: AgentSpec) -> bool:
        return agent.harness is Harness.QA_REPLAY

    def time_budget_s(self) -> int | None:
        """The largest time budget of the pool's dataset cards."""
        from tasks_lib.qa.planning import qa_time_budget

        return int(qa_time_budget(list(_pool(self.pool_url, self.pool_hash).manifest.datasets)))

    def run_chunk(self, agent: AgentSpec, replicate: int, start: int, stop: int,
                  limits: RunLimits, options: CallOptions) -> ChunkResult:
        run_id = self.run_id(agent, replicate)
        pool = _pool(self.pool_url, self.pool_hash)

        def progress(report: RunProgress) -> None:
            publish(ChunkProgress(run_id=run_id, replicate=replicate, start=start,
                                  run_items=len(pool.items), progress=report))

        batch = run_agent(agent, pool.items[start:stop], pool.exemplars, price_snapshot(),
                          progress=progress, limits=limits, options=options,
                          replicate=replicate)
        answers = _redacted(batch.answers)
        return ChunkResult(run_id=run_id, start=start, stop=stop,
                           lines=[a.model_dump(mode="json") for a in answers],
                           stopped=batch.stopped,
                           run_cost_usd=known_sum([limits.spent_usd,
                                                   *(a.cost_usd for a in answers)]))

    def assemble(self, agent: AgentSpec, replicate: int, chunks: list[ChunkResult],
                 started_at: float, budgets: Budgets) -> RunRecord:
        """``answers.jsonl`` in pool order; timeout / partial (cost budget) / completed."""
        pool = _pool(self.pool_url, self.pool_hash)
        run_id = self.run_id(agent, replicate)
        answers = [QAAnswer.model_validate(line)
                   for c in sorted(chunks, key=lambda c: c.start) for line in c.lines]
        run_store(run_id).write_jsonl(f"{SUBMISSION}/{ANSWERS}", answers)
        stops = {c.stopped for c in chunks} - {None}
        status, error = RunStatus.COMPLETED, None
        if StopReason.TIME in stops:
            status = RunStatus.TIMEOUT
            error = f"time budget of {budgets.time_budget_s} s exhausted"
        elif StopReason.BUDGET in stops:
            status = RunStatus.PARTIAL
            spent = "spent" if total_cost(answers) is not None else "no longer checkable (an " \
                "item's cost is unknown: unpriced model)"
            error = (f"cost budget of ${budgets.max_cost_usd:g} {spent} after {len(answers)} of "
                     f"{len(pool.items)} items (re-run with a larger --max-cost-usd to resume)")
        item_time = known_sum(a.time_s for a in answers)
        live = not self.replayed(agent)
        return RunRecord(
            run_id=run_id, agent=agent, task_id=pool.manifest.pool_id, track=Track.QA,
            tier=Tier.STANDARD, replicate=replicate, status=status, pool_url=self.pool_url,
            pool_id=pool.manifest.pool_id, pool_version=pool.manifest.version,
            pool_hash=self.pool_hash, n_items=len(pool.items),
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
