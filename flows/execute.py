"""execute: run each agent on the pool's public view, store submissions, record runs."""

from __future__ import annotations

from prefect import flow, unmapped
from prefect.artifacts import create_markdown_artifact

from flows.score import score_runs
from tasks_lib.artifacts import artifact_key
from tasks_lib.domain import Tier
from tasks_lib.harness.cell import local_pool_dir
from tasks_lib.harness.matrix import (
    MatrixRun,
    markdown,
    matrix_folder,
    summarise,
    write_report,
)
from tasks_lib.harness.record import CellReport, build_reports
from tasks_lib.harness.steps import execute_step, plan_grid_step, plan_step
from tasks_lib.imaging.pool import load_task
from tasks_lib.qa.planning import plan_agents, qa_time_budget, read_manifest, resolve_pool_ref
from tasks_lib.qa.run_steps import execute_agent, record_run_step
from tasks_lib.records import RunRecord
from tasks_lib.sandbox.base import SandboxBackend


@flow(name="execute-qa", flow_run_name="execute-qa", log_prints=True)
def execute_qa(
    pool: str,
    agents: list[str] | None = None,
    replay: str | None = None,
    replay_models: list[str] | None = None,
    replay_methods: list[str] | None = None,
    replicate: int = 0,
    replicates: int = 1,
    time_budget_s: int | None = None,
) -> list[RunRecord]:
    """Run catalog agents and/or replay recorded (model, method) groups on a published pool
    (a root URL, or ``active:<subset_id>`` for the active rotation subset):
    replicates ``replicate … replicate + replicates − 1`` of each, within a time budget per run
    (default: the largest of the dataset cards')."""
    pool = resolve_pool_ref(pool)
    manifest = read_manifest(pool)
    specs = plan_agents(agents or [], replay, replay_models, replay_methods)
    budget = time_budget_s or qa_time_budget(list(manifest.datasets))
    plan = [(a, r) for a in specs for r in range(replicate, replicate + replicates)]
    futures = execute_agent.map([a for a, _ in plan], unmapped(pool),
                                unmapped(manifest.content_hash), [r for _, r in plan],
                                unmapped(Tier.STANDARD), unmapped(budget))
    runs: list[RunRecord] = futures.result()
    record_run_step.map(runs).result()
    print(f"executed {len(runs)} runs on {manifest.pool_id} v{manifest.version}")
    return runs


# Research cells (AutoMedBench S1–S5): agent × task × tier × replicate in a sandbox. Execute
# stops at submission + trace + run record; the score flow scores them from storage alone.


@flow(name="run-cell", flow_run_name="cell-{agent_id}-{task_id}-{tier}-r{replicate}",
      log_prints=True)
def run_cell(agent_id: str, task_id: str, tier: str = "lite", sandbox: str = "local",
             replicate: int = 0, judge_model: str | None = None) -> CellReport:
    """One evaluation cell: plan → execute (stores the run) → score (score flow) → report."""
    card = load_task(task_id)
    plan = plan_step(agent_id, task_id, card.track, Tier(tier), SandboxBackend(sandbox),
                     replicate, str(local_pool_dir(task_id)), judge_model, card.time_budget_s)
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
