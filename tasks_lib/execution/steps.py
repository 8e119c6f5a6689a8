"""The execute steps shared by every kit whose agents answer items.

A run is split into chunks of items (``MEDFLOWS_EXECUTE_CHUNK`` or ``chunk_size``), one Prefect
task run each, so agents × chunks spread over the task runner's workers (a Dask cluster when
``MEDFLOWS_DASK_ADDRESS`` is set); every worker shares the call cache through storage, so a chunk
retried elsewhere re-asks nothing. Chunks are submitted round-robin over runs (chunk 0 of every
run first); with a cost budget a run's chunks are chained, each carrying the run's spend so far,
and a chunk after a stopped one asks nothing. :func:`assemble_run` joins a run's chunks through
the kit's environment; :func:`record_run_step` ledgers the record. Scoring is the one score
flow's.
"""

from __future__ import annotations

import time
from typing import Any, cast
from uuid import UUID

from prefect import task
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture, as_completed

from evaluators.core import InputDataError
from tasks_lib.agents import AgentSpec
from tasks_lib.artifacts import artifact_key
from tasks_lib.caching import IO_RETRIES, cached
from tasks_lib.execution.environment import Budgets, ChunkResult, ItemEnvironment, Planned
from tasks_lib.item_runner import RunLimits, StopReason
from tasks_lib.llm import CallOptions
from tasks_lib.llm_cache import call_journal, write_journal
from tasks_lib.records import RunRecord, run_store
from tasks_lib.scoring import record_run


@task(name="execute-chunk", task_run_name="execute-{agent.agent_id}-r{replicate}-{start}",
      cache_policy=NO_CACHE, persist_result=False, **IO_RETRIES)
def execute_chunk(env: ItemEnvironment, agent: AgentSpec, replicate: int, start: int, stop: int,
                  deadline_at: float | None = None, max_cost_usd: float | None = None,
                  options: CallOptions | None = None,
                  previous: ChunkResult | None = None) -> ChunkResult:
    """Ask (or replay) items ``start`` … ``stop − 1`` of the run's item order.

    ``deadline_at`` is a ``time.time()`` instant; ``previous`` (the run's preceding chunk, given
    only when a cost budget chains the chunks) carries the run's spend so far. Live agents
    resume through the call cache, so this step is result-cached only for replays
    (:func:`chunk_step`).
    """
    spent = previous.run_cost_usd if previous else 0.0
    if previous is not None and (previous.stopped is not None or spent is None):
        # An unknown spend cannot be checked against the cap: the run stops as if it were spent
        # (tasks_lib.item_runner), never silently short of items.
        return ChunkResult(run_id=previous.run_id, start=start, stop=stop, lines=[],
                           stopped=previous.stopped or StopReason.BUDGET, run_cost_usd=spent)
    deadline = None if deadline_at is None else time.monotonic() + (deadline_at - time.time())
    limits = RunLimits(deadline=deadline, max_cost_usd=max_cost_usd, spent_usd=spent or 0.0)
    with call_journal() as used:
        result = env.run_chunk(agent, replicate, start, stop, limits, options or CallOptions())
    write_journal(run_store(result.run_id), f"chunk-{start:06d}", used)
    return result


def chunk_step(env: ItemEnvironment, agent: AgentSpec) -> Any:
    """The execute step for ``agent``: result-cached for replays (deterministic; keyed also on
    the environment's modules and settings files), not for live agents (the call cache resumes
    them, and a re-run must retry items that errored)."""
    if not env.replayed(agent):
        return execute_chunk
    return execute_chunk.with_options(**cached(modules=env.cache_modules,
                                               settings_files=env.cache_settings, **IO_RETRIES))


@task(name="assemble-run", task_run_name="assemble-{agent.agent_id}-r{replicate}",
      cache_policy=NO_CACHE, persist_result=False, **IO_RETRIES)
def assemble_run(env: ItemEnvironment, agent: AgentSpec, replicate: int,
                 chunks: list[ChunkResult], started_at: float,
                 budgets: Budgets = Budgets(None, None)) -> RunRecord:
    """Join a run's chunks into its submission, trace and run record (the kit's
    :meth:`~ItemEnvironment.assemble`)."""
    return env.assemble(agent, replicate, chunks, started_at, budgets)


def assemble_step(env: ItemEnvironment, agent: AgentSpec) -> Any:
    """The assemble step for ``agent``: result-cached on the chunks for replays (the same
    replayed lines are not written again on a re-run); live chunks differ in timings and cache
    hits, so a live run is always re-assembled."""
    if not env.replayed(agent):
        return assemble_run
    return assemble_run.with_options(**cached(
        modules=(*env.cache_modules, "tasks_lib.records", "tasks_lib.storage"),
        ignore_inputs=("started_at",), **IO_RETRIES))


@task(name="record-run", task_run_name="record-run-{run.agent.agent_id}", **IO_RETRIES)
def record_run_step(run: RunRecord) -> None:
    """Store run.json and upsert the ledger row (never cached: a cache hit upstream still
    reaches a new ledger)."""
    record_run(run)


def chunk_ranges(n_items: int, size: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of each chunk of a run of ``n_items`` (at least one, possibly empty)."""
    if size < 1:
        raise InputDataError("--chunk-size", f"must be >= 1, got {size}")
    return [(i, min(i + size, n_items)) for i in range(0, n_items, size)] or [(0, 0)]


def submit_chunks(env: ItemEnvironment, plan: list[Planned], size: int, deadline_at: float | None,
                  max_cost_usd: float | None) -> list[list[PrefectFuture[ChunkResult]]]:
    """Submit every run's chunks, round-robin over runs (chunk 0 of each run first), so workers
    start on many runs at once; with a cost budget a run's chunks are chained in order. A
    replayed run is one chunk without deadline or budget."""
    ranges = [[(0, env.n_items)] if env.replayed(p.agent) else chunk_ranges(env.n_items, size)
              for p in plan]
    chunks: list[list[PrefectFuture[ChunkResult]]] = [[] for _ in plan]
    for wave in range(max((len(r) for r in ranges), default=0)):
        for index, (agent, rep, options) in enumerate(plan):
            if wave >= len(ranges[index]):
                continue
            start, stop = ranges[index][wave]
            replayed = env.replayed(agent)
            previous = chunks[index][-1] if chunks[index] and max_cost_usd is not None else None
            chunks[index].append(chunk_step(env, agent).submit(
                env, agent, rep, start, stop, None if replayed else deadline_at,
                None if replayed else max_cost_usd, options, previous))
    return chunks


def follow(env: ItemEnvironment, chunks: list[list[PrefectFuture[ChunkResult]]],
           plan: list[Planned]) -> None:
    """Wait for every chunk, keeping one Prefect progress artifact per live run up to date."""
    owner = {id(f): i for i, fs in enumerate(chunks) for f in fs}
    artifacts = {i: cast(UUID, create_progress_artifact(
        0.0, key=artifact_key(f"execute-{env.pool_id}-{p.agent.agent_id}-r{p.replicate}"),
        description=f"{p.agent.agent_id} r{p.replicate} on {env.pool_id}"))
        for i, p in enumerate(plan) if not env.replayed(p.agent)}
    done = dict.fromkeys(artifacts, 0)
    for future in as_completed([f for fs in chunks for f in fs]):
        index = owner[id(future)]
        if index in artifacts:
            result = future.result()
            done[index] += result.stop - result.start
            update_progress_artifact(artifacts[index],
                                     100.0 * done[index] / max(env.n_items, 1))


def execute_items(env: ItemEnvironment, plan: list[Planned], *, chunk_size: int,
                  time_budget_s: int | None, max_cost_usd: float | None) -> list[RunRecord]:
    """Run every planned (agent, replicate) on ``env`` in chunks, assemble and ledger each run
    (call it inside a flow). Returns the run records in plan order."""
    if max_cost_usd is not None and max_cost_usd < 0:
        raise InputDataError("--max-cost-usd", f"must be >= 0, got {max_cost_usd}")
    started = time.time()
    deadline_at = None if time_budget_s is None else started + time_budget_s
    chunks = submit_chunks(env, plan, chunk_size, deadline_at, max_cost_usd)
    follow(env, chunks, plan)
    budgets = Budgets(time_budget_s, max_cost_usd)
    assembled = [assemble_step(env, p.agent).submit(env, p.agent, p.replicate,
                                                    [f.result() for f in chunks[i]],
                                                    started, budgets)
                 for i, p in enumerate(plan)]
    runs: list[RunRecord] = [f.result() for f in assembled]
    record_run_step.map(runs).result()
    return runs


def pool_kit_name(pool: str) -> str:
    """The kit (track name) of a published pool (a root URL or ``active:<subset_id>``), from
    the ledger row its publication wrote."""
    from tasks_lib.ledger import store
    from tasks_lib.scoring import pool_version

    found = pool_version(pool)
    rows = store.pools(pool_id=found.pool_id, version=found.version)
    if not rows:
        raise InputDataError(pool, f"{found.pool_id} v{found.version} is not a published pool "
                                   "(not in the ledger)")
    return rows[0].track


def pool_cards(manifest: dict[str, Any]) -> list[str]:
    """Task ids a research pool holds: the shared header's ``cards``
    (:class:`tasks_lib.pool_format.PoolHeader`; a manifest written before it: its one
    ``task_id`` or its ``studies``)."""
    cards = manifest.get("cards")
    if isinstance(cards, list) and cards:
        return [str(c) for c in cards]
    one = manifest.get("task_id")
    return [one] if isinstance(one, str) else list(manifest.get("studies") or [])


def cell_tasks(pool_url: str, only: list[str] | None = None) -> list[str]:
    """The task ids research cells run on for the pool at ``pool_url``: its cards (or ``only``
    those). Cells run on the newest published version serving a card, so an older version of
    the pool is refused rather than silently replaced.

    Raises:
        InputDataError: an older version, or an id of ``only`` the pool does not hold.
    """
    from tasks_lib.ledger import store
    from tasks_lib.scoring import pool_version
    from tasks_lib.storage import Storage

    found = pool_version(pool_url)
    newest = max((r.version for r in store.pools(pool_id=found.pool_id)), default=found.version)
    if found.version != newest:
        raise InputDataError(pool_url, f"research cells run on the newest version of "
                                       f"{found.pool_id} (v{newest}), not v{found.version}")
    held = pool_cards(Storage(pool_url).read_json("manifest.json"))
    unknown = sorted(set(only or []) - set(held))
    if unknown:
        raise InputDataError("--task", f"{', '.join(unknown)} not in this pool (it holds "
                                       f"{', '.join(held)})")
    return list(only or held)
