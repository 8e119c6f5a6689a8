"""execute: run each agent on the pool's public view, store submissions, record runs."""

from __future__ import annotations

import time
from typing import cast
from uuid import UUID

from prefect import flow
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    update_progress_artifact,
)
from prefect.futures import PrefectFuture, as_completed

from flows.score import score_runs
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.artifacts import artifact_key
from tasks_lib.compute import SettingsTaskRunner
from tasks_lib.domain import Tier
from tasks_lib.harness.matrix import (
    MatrixRun,
    markdown,
    matrix_folder,
    summarise,
    write_report,
)
from tasks_lib.harness.record import CellReport, build_reports
from tasks_lib.harness.steps import execute_step, plan_grid_step, plan_step
from tasks_lib.llm import CallOptions
from tasks_lib.qa.planning import plan_agents, qa_time_budget, read_manifest, resolve_pool_ref
from tasks_lib.qa.run_steps import ChunkResult, assemble_run, chunk_step, record_run_step
from tasks_lib.records import RunRecord
from tasks_lib.sandbox.base import SandboxBackend
from tasks_lib.settings import get_settings


@flow(name="execute-qa", flow_run_name="execute-qa", log_prints=True,
      task_runner=SettingsTaskRunner())
def execute_qa(
    pool: str,
    agents: list[str] | None = None,
    replay: str | None = None,
    replay_models: list[str] | None = None,
    replay_methods: list[str] | None = None,
    replicate: int = 0,
    replicates: int = 1,
    time_budget_s: int | None = None,
    max_cost_usd: float | None = None,
    max_connections: int | None = None,
    rpm: int | None = None,
    tpm: int | None = None,
    cache: bool = True,
    chunk_size: int | None = None,
) -> list[RunRecord]:
    """Run catalog agents and/or replay recorded (model, method) groups on a published pool
    (a root URL, or ``active:<subset_id>`` for the active rotation subset):
    replicates ``replicate … replicate + replicates − 1`` of each, within a time budget per run
    (default: the largest of the dataset cards') and an optional cost budget per run (USD; a run
    that reaches it ends ``partial`` and resumes from the call cache when re-run with more).
    ``max_connections``/``rpm``/``tpm``/``cache`` override the agents' params and the settings.
    Each run is split into chunks of ``chunk_size`` items (default ``MEDFLOWS_EXECUTE_CHUNK``),
    one task run each."""
    pool = resolve_pool_ref(pool)
    manifest = read_manifest(pool)
    specs = plan_agents(agents or [], replay, replay_models, replay_methods)
    budget = time_budget_s or qa_time_budget(list(manifest.datasets))
    options = CallOptions(max_connections=max_connections, rpm=rpm, tpm=tpm, cache=cache)
    n_items = sum(d.n_items for d in manifest.datasets.values())
    size = chunk_size or get_settings().execute_chunk
    plan = [(a, r) for a in specs for r in range(replicate, replicate + replicates)]
    started = time.time()
    chunks = _submit_chunks(plan, pool, manifest.content_hash, n_items, size, started + budget,
                            max_cost_usd, options)
    _follow(chunks, plan, n_items, manifest.pool_id)
    assembled = [assemble_run.submit(a, pool, manifest.content_hash, r,
                                     [f.result() for f in chunks[i]],  # all done (_follow)
                                     started, Tier.STANDARD, budget, max_cost_usd)
                 for i, (a, r) in enumerate(plan)]
    runs: list[RunRecord] = [f.result() for f in assembled]
    record_run_step.map(runs).result()
    print(f"executed {len(runs)} runs on {manifest.pool_id} v{manifest.version}")
    return runs


def _submit_chunks(plan: list[tuple[AgentSpec, int]], pool: str, pool_hash: str, n_items: int,
                   size: int, deadline_at: float, max_cost_usd: float | None,
                   options: CallOptions) -> list[list[PrefectFuture[ChunkResult]]]:
    """Submit every run's chunks, round-robin over runs (chunk 0 of each run first), so workers
    start on many runs at once; with a cost budget a run's chunks are chained in order."""
    ranges = [[(0, n_items)] if a.harness is Harness.QA_REPLAY else
              [(i, min(i + size, n_items)) for i in range(0, n_items, size)] for a, _ in plan]
    chunks: list[list[PrefectFuture[ChunkResult]]] = [[] for _ in plan]
    for wave in range(max((len(r) for r in ranges), default=0)):
        for index, (agent, rep) in enumerate(plan):
            if wave >= len(ranges[index]):
                continue
            start, stop = ranges[index][wave]
            replayed = agent.harness is Harness.QA_REPLAY
            previous = chunks[index][-1] if chunks[index] and max_cost_usd is not None else None
            chunks[index].append(chunk_step(agent).submit(
                agent, pool, pool_hash, rep, start, stop, None if replayed else deadline_at,
                None if replayed else max_cost_usd, options, previous))
    return chunks


def _follow(chunks: list[list[PrefectFuture[ChunkResult]]], plan: list[tuple[AgentSpec, int]],
            n_items: int, pool_id: str) -> None:
    """Wait for every chunk, keeping one Prefect progress artifact per live run up to date."""
    owner = {id(f): i for i, fs in enumerate(chunks) for f in fs}
    artifacts = {i: cast(UUID, create_progress_artifact(
        0.0, key=artifact_key(f"execute-{pool_id}-{a.agent_id}-r{r}"),
        description=f"{a.agent_id} r{r} on {pool_id}"))
        for i, (a, r) in enumerate(plan) if a.harness is not Harness.QA_REPLAY}
    done = dict.fromkeys(artifacts, 0)
    for future in as_completed([f for fs in chunks for f in fs]):
        index = owner[id(future)]
        if index in artifacts:
            result = future.result()
            done[index] += result.stop - result.start
            update_progress_artifact(artifacts[index], 100.0 * done[index] / max(n_items, 1))


# Research cells (AutoMedBench S1–S5): agent × task × tier × replicate in a sandbox. Execute
# stops at submission + trace + run record; the score flow scores them from storage alone.


@flow(name="run-cell", flow_run_name="cell-{agent_id}-{task_id}-{tier}-r{replicate}",
      log_prints=True)
def run_cell(agent_id: str, task_id: str, tier: str = "lite", sandbox: str = "local",
             replicate: int = 0, judge_model: str | None = None) -> CellReport:
    """One evaluation cell: plan → execute (stores the run) → score (score flow) → report."""
    plan = plan_step(agent_id, task_id, Tier(tier), SandboxBackend(sandbox), replicate,
                     judge_model)
    run = execute_step(plan)
    report = build_reports([run], score_runs(run_ids=[run.run_id]))[0]
    print(f"{report.run_id}: {report.status.value} overall={report.overall} "
          f"agentic={report.agentic} task={report.task_score}")
    return report


@flow(name="run-matrix", flow_run_name="matrix-{matrix_id}", log_prints=True)
def run_matrix(matrix_id: str, agents: list[str], tasks: list[str], tiers: list[str],
               replicates: int = 1, sandbox: str = "local",
               judge_model: str | None = None) -> MatrixRun:
    """Execute agents × tasks × tiers × replicates (one step per cell, concurrency = the task
    runner's workers), score every run in one score flow, and write the matrix report."""
    plans = plan_grid_step(agents, tasks, [Tier(t) for t in tiers], replicates,
                           SandboxBackend(sandbox), judge_model)
    runs = execute_step.map(plans).result()
    reports = build_reports(runs, score_runs(run_ids=[r.run_id for r in runs]))
    summary = summarise(reports)
    report_path = write_report(summary, matrix_folder(matrix_id))
    create_markdown_artifact(key=artifact_key(f"matrix-{matrix_id}"), markdown=markdown(summary),
                             description=f"Research matrix {matrix_id}")
    print(f"matrix {matrix_id}: {len(reports)} runs → {report_path}")
    return MatrixRun(report_json=str(report_path), report=summary)
