"""execute: run each agent on the pool's public view, store submissions, record runs."""

from __future__ import annotations

from prefect import flow, unmapped
from prefect.artifacts import create_markdown_artifact

from tasks_lib.artifacts import artifact_key
from tasks_lib.domain import Tier
from tasks_lib.errors import InputDataError
from tasks_lib.harness.matrix import (
    MatrixRun,
    markdown,
    matrix_folder,
    summarise,
    write_report,
)
from tasks_lib.harness.record import CellReport
from tasks_lib.harness.steps import (
    cell_step,
    evaluate_step,
    execute_step,
    judge_step,
    plan_step,
    record_step,
)
from tasks_lib.imaging.pool import load_task
from tasks_lib.qa.planning import plan_agents, read_manifest
from tasks_lib.qa.run_steps import QARun, execute_agent, record_run
from tasks_lib.sandbox.base import SandboxBackend


@flow(name="execute-qa", flow_run_name="execute-qa", log_prints=True)
def execute_qa(
    pool: str,
    agents: list[str] | None = None,
    replay: str | None = None,
    replay_models: list[str] | None = None,
    replay_methods: list[str] | None = None,
    replicate: int = 0,
) -> list[QARun]:
    """Run catalog agents and/or replay recorded (model, method) groups on a published pool."""
    manifest = read_manifest(pool)
    specs = plan_agents(agents or [], replay, replay_models, replay_methods)
    futures = execute_agent.map(specs, unmapped(pool), unmapped(manifest.content_hash),
                                unmapped(replicate))
    runs: list[QARun] = futures.result()
    record_run.map(runs).result()
    print(f"executed {len(runs)} runs on {manifest.pool_id} v{manifest.version}")
    return runs


# Research cells (AutoMedBench S1–S5): agent × task × tier × replicate in a sandbox.


def _pool_dir(task_id: str) -> str:
    """Local folder of the task's default pool, built (construct DAG subflow) if missing."""
    from flows.construct import ensure_imaging_pool
    from tasks_lib.imaging.pool import default_pool_url

    url = default_pool_url(task_id)
    if "://" in url.removeprefix("file://"):
        raise InputDataError(url, "research cells mount pools into sandboxes: set "
                                  "MEDFLOWS_STORAGE_URL to a local folder")
    return ensure_imaging_pool(task_id, url).removeprefix("file://")


@flow(name="run-cell", flow_run_name="cell-{agent_id}-{task_id}-{tier}-r{replicate}",
      log_prints=True)
def run_cell(agent_id: str, task_id: str, tier: str = "lite", sandbox: str = "local",
             replicate: int = 0, judge_model: str | None = None) -> CellReport:
    """One evaluation cell end to end: plan → execute → evaluate → judge → record."""
    card = load_task(task_id)
    plan = plan_step(agent_id, task_id, card.track, Tier(tier), SandboxBackend(sandbox),
                     replicate, _pool_dir(task_id), judge_model, card.time_budget_s)
    execution = execute_step(plan)
    product = evaluate_step(plan, execution)
    scores = judge_step(plan, execution, product)
    report = record_step(plan, execution, scores)
    print(f"{report.run_id}: {report.status.value} overall={report.overall} "
          f"agentic={report.agentic} task={report.task_score}")
    return report


@flow(name="run-matrix", flow_run_name="matrix-{matrix_id}", log_prints=True)
def run_matrix(matrix_id: str, agents: list[str], tasks: list[str], tiers: list[str],
               replicates: int = 1, sandbox: str = "local",
               judge_model: str | None = None) -> MatrixRun:
    """Fan out agents × tasks × tiers × replicates (concurrency = the task runner's workers)."""
    cards = {t: load_task(t) for t in tasks}
    pools = {t: _pool_dir(t) for t in tasks}
    plans = [plan_step(a, t, cards[t].track, Tier(tier), SandboxBackend(sandbox), r, pools[t],
                       judge_model, cards[t].time_budget_s)
             for a in agents for t in tasks for tier in tiers for r in range(replicates)]
    reports: list[CellReport] = cell_step.map(plans).result()
    summary = summarise(reports)
    report_path = write_report(summary, matrix_folder(matrix_id))
    create_markdown_artifact(key=artifact_key(f"matrix-{matrix_id}"), markdown=markdown(summary),
                             description=f"Research matrix {matrix_id}")
    print(f"matrix {matrix_id}: {len(reports)} runs → {report_path}")
    return MatrixRun(report_json=str(report_path), report=summary)
