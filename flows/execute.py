"""execute: run each agent on the pool's public view, store submissions, record runs."""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from pydantic import Field

from flows import compose
from tasks_lib.agents import Harness, resolve_agent
from tasks_lib.artifacts import artifact_key
from tasks_lib.compute import SettingsTaskRunner
from tasks_lib.domain import Frozen, Tier, Track
from tasks_lib.execution.environment import ItemEnvironment, Planned
from tasks_lib.execution.steps import cell_tasks, execute_items, pool_kit_name
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
from tasks_lib.qa.planning import plan_agents
from tasks_lib.records import RunRecord
from tasks_lib.rotation import resolve_pool
from tasks_lib.sandbox.base import SandboxBackend
from tasks_lib.settings import get_settings
from tasks_lib.taskspec import Budget
from tasks_lib.tracks.base import kit_for

# Kits are registered when a flow runs, not when this module is imported: execute-qa needs only
# the QA kit, and registering every kit would cost it 1.5 s before its first model call.

CELL_HARNESSES = frozenset({Harness.SCRIPTED, Harness.TOOL_LOOP, Harness.EXTERNAL})
"""Agents that work in a sandbox on a task card (research cells), not on items."""


class PoolExecution(Frozen):
    """What the execute flow returns."""

    runs: list[RunRecord] = Field(description="Run records of the item agents, in plan order.")
    matrix: MatrixRun | None = Field(
        default=None, description="The research-cell matrix (None: no cell agent was named).")


@flow(name="execute", flow_run_name="execute", log_prints=True, task_runner=SettingsTaskRunner())
def execute_pool(pool: str, agents: list[str], replicate: int = 0, replicates: int = 1,
                 time_budget_s: int | None = None, max_cost_usd: float | None = None,
                 max_connections: int | None = None, rpm: int | None = None,
                 tpm: int | None = None, cache: bool = True, chunk_size: int | None = None,
                 tiers: list[str] | None = None, sandbox: str = "local",
                 judge_model: str | None = None) -> PoolExecution:
    """Run catalog agents on any published pool (a root URL or ``active:<subset_id>``): the
    ledger names the pool's kit; item agents (replays, reasoning methods, API models) act on
    the kit's item environment, chunked (:func:`tasks_lib.execution.steps.execute_items`);
    research-cell agents (``scripted``/``tool_loop``/``external:<name>@<model>``) run as a
    matrix on the pool's cards (``tiers``, default lite; ``sandbox``; scored by the one score
    flow)."""
    compose()
    url = resolve_pool(pool)
    kit = kit_for(pool_kit_name(url))
    specs = [resolve_agent(a) for a in agents]
    items = [s for s in specs if s.harness not in CELL_HARNESSES]
    cells = [s.agent_id for s in specs if s.harness in CELL_HARNESSES]
    runs: list[RunRecord] = []
    if items:
        options = CallOptions(max_connections=max_connections, rpm=rpm, tpm=tpm, cache=cache)
        env = kit.item_environment(url)
        runs = run_item_agents(env, [Planned(a, r, options) for a in items
                                     for r in range(replicate, replicate + replicates)],
                               time_budget_s, max_cost_usd, chunk_size)
    matrix = None
    if cells:
        cards = cell_tasks(url)
        matrix = run_matrix(f"{kit.track.value}-{cards[0]}" if len(cards) == 1 else
                            f"{kit.track.value}-pool", cells, cards, tiers or ["lite"],
                            replicates, sandbox, judge_model, max_cost_usd=max_cost_usd,
                            wall_time_s=time_budget_s)
    return PoolExecution(runs=runs, matrix=matrix)


def run_item_agents(env: ItemEnvironment, plan: list[Planned], time_budget_s: int | None,
                    max_cost_usd: float | None, chunk_size: int | None) -> list[RunRecord]:
    """Item agents on ``env`` (inside a flow): chunked, budgeted, assembled and ledgered."""
    runs = execute_items(env, plan, chunk_size=chunk_size or get_settings().execute_chunk,
                         time_budget_s=time_budget_s or env.time_budget_s(),
                         max_cost_usd=max_cost_usd)
    print(f"executed {len(runs)} runs on {env.pool_id} v{env.pool_version}")
    return runs


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
    """The execute path on a QA pool (a root URL, or ``active:<subset_id>``), with recorded
    (model, method) groups replayed beside catalog agents: replicates ``replicate … replicate
    + replicates − 1`` of each, within a time budget per run (default: the largest of the
    dataset cards') and an optional cost budget per run (USD; a run that reaches it ends
    ``partial`` and resumes from the call cache when re-run with more).
    ``max_connections``/``rpm``/``tpm``/``cache`` override the agents' params and the settings.
    Each run is split into chunks of ``chunk_size`` items (default ``MEDFLOWS_EXECUTE_CHUNK``),
    one task run each."""
    from tasks_lib.tracks import qa  # noqa: F401  (registers the one kit this flow uses)

    url = resolve_pool(pool)
    env = kit_for(Track.QA).item_environment(url)  # the alias names its kit
    specs = plan_agents(agents or [], replay, replay_models, replay_methods)
    options = CallOptions(max_connections=max_connections, rpm=rpm, tpm=tpm, cache=cache)
    plan = [Planned(a, r, options) for a in specs for r in range(replicate, replicate + replicates)]
    return run_item_agents(env, plan, time_budget_s, max_cost_usd, chunk_size)


# Research cells (AutoMedBench S1–S5): agent × task × tier × replicate in a sandbox. Execute
# stops at submission + trace + run record; the score flow scores them from storage alone.


@flow(name="run-cell", flow_run_name="cell-{agent_id}-{task_id}-{tier}-r{replicate}",
      log_prints=True)
def run_cell(agent_id: str, task_id: str, tier: str = "lite", sandbox: str = "local",
             replicate: int = 0, judge_model: str | None = None,
             max_cost_usd: float | None = None, max_steps: int | None = None,
             wall_time_s: int | None = None) -> CellReport:
    """One evaluation cell: plan → execute (stores the run) → score (score flow) → report.
    ``max_cost_usd``, ``max_steps``, ``wall_time_s``: the run's own caps over the card's."""
    from flows.score import score_runs

    compose()
    plan = plan_step(agent_id, task_id, Tier(tier), SandboxBackend(sandbox), replicate,
                     judge_model, Budget(max_cost_usd=max_cost_usd, max_steps=max_steps,
                                         wall_time_s=wall_time_s))
    run = execute_step(plan)
    report = build_reports([run], score_runs(run_ids=[run.run_id]))[0]
    print(f"{report.run_id}: {report.status.value} overall={report.overall} "
          f"agentic={report.agentic} task={report.task_score}")
    return report


@flow(name="run-matrix", flow_run_name="matrix-{matrix_id}", log_prints=True)
def run_matrix(matrix_id: str, agents: list[str], tasks: list[str], tiers: list[str],
               replicates: int = 1, sandbox: str = "local",
               judge_model: str | None = None, max_cost_usd: float | None = None,
               max_steps: int | None = None, wall_time_s: int | None = None) -> MatrixRun:
    """Execute agents × tasks × tiers × replicates (one step per cell, concurrency = the task
    runner's workers), score every run in one score flow, and write the matrix report.
    ``max_cost_usd``, ``max_steps``, ``wall_time_s``: every run's own caps over the cards'."""
    from flows.score import score_runs

    compose()
    plans = plan_grid_step(agents, tasks, [Tier(t) for t in tiers], replicates,
                           SandboxBackend(sandbox), judge_model,
                           Budget(max_cost_usd=max_cost_usd, max_steps=max_steps,
                                  wall_time_s=wall_time_s))
    runs = execute_step.map(plans).result()
    reports = build_reports(runs, score_runs(run_ids=[r.run_id for r in runs]))
    summary = summarise(reports)
    report_path = write_report(summary, matrix_folder(matrix_id))
    create_markdown_artifact(key=artifact_key(f"matrix-{matrix_id}"), markdown=markdown(summary),
                             description=f"Research matrix {matrix_id}")
    print(f"matrix {matrix_id}: {len(reports)} runs → {report_path}")
    return MatrixRun(report_json=str(report_path), report=summary)
