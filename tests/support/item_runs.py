"""One replicate of an item agent in this process, without Prefect (tests of a kit's item
environment; the execute flows run the same environment chunked, :mod:`tasks_lib.execution`)."""

from __future__ import annotations

import time

from tasks_lib.agents import AgentSpec
from tasks_lib.errors import InputDataError
from tasks_lib.execution.environment import Budgets, ItemEnvironment
from tasks_lib.item_runner import RunLimits
from tasks_lib.llm import CallOptions
from tasks_lib.records import RunRecord


def run_in_process(env: ItemEnvironment, agent: AgentSpec, replicate: int,
                   options: CallOptions, budgets: Budgets = Budgets(None, None)) -> RunRecord:
    """One replicate as one chunk; stores submission, trace and run record files, not the
    ledger row."""
    started = time.time()
    deadline = None if budgets.time_budget_s is None else \
        time.monotonic() + budgets.time_budget_s
    chunk = env.run_chunk(agent, replicate, 0, env.n_items,
                          RunLimits(deadline=deadline, max_cost_usd=budgets.max_cost_usd),
                          options)
    return env.assemble(agent, replicate, [chunk], started, budgets)


def run_api(agent: AgentSpec, pool_url: str, replicate: int, options: CallOptions,
            max_cost_usd: float | None = None) -> RunRecord:
    """One MedBench API-mode replicate of ``agent`` on every item of the pool."""
    from tasks_lib.medbench.api import MedBenchEnvironment

    if max_cost_usd is not None and max_cost_usd < 0:
        raise InputDataError("--max-cost-usd", f"must be >= 0, got {max_cost_usd}")
    return run_in_process(MedBenchEnvironment.open(pool_url), agent, replicate, options,
                          Budgets(None, max_cost_usd))
