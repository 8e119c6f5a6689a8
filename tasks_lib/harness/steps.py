"""Prefect steps of the execute DAG's research cells (each does one thing)."""

from __future__ import annotations

from prefect import task

from tasks_lib.domain import RunStatus, Tier, Track
from tasks_lib.harness import cell as cell_mod
from tasks_lib.harness.cell import CellPlan, CellScores, Execution
from tasks_lib.harness.evaluate import ProductScore, run_evaluator
from tasks_lib.harness.messages import ChatMessage
from tasks_lib.harness.record import CellReport, build_report, record_execution, write_ledger
from tasks_lib.sandbox.base import SandboxBackend
from tasks_lib.settings import get_settings
from tasks_lib.taskspec import TaskSpec


@task(task_run_name="plan-{agent_id}-{task_id}-{tier}-r{replicate}")
def plan_step(agent_id: str, task_id: str, track: Track, tier: Tier, backend: SandboxBackend,
              replicate: int, pool_dir: str, judge_model: str | None,
              time_budget_s: int) -> CellPlan:
    """Resolve the agent, fix the run id, folders and limits."""
    from pathlib import Path

    return cell_mod.plan_cell(agent_id, task_id, track, tier, backend, replicate, Path(pool_dir),
                              judge_model or get_settings().judge_model, time_budget_s)


@task(task_run_name="execute-{plan.run_id}")
def execute_step(plan: CellPlan) -> Execution:
    """Run the agent in its sandbox (fresh workspace) and ledger the run with its cost."""
    execution = cell_mod.execute_cell(plan)
    record_execution(plan, execution)
    return execution


@task(task_run_name="evaluate-{plan.run_id}")
def evaluate_step(plan: CellPlan, execution: Execution) -> ProductScore | None:
    """Score the submission in an evaluator sandbox; invalid runs are excluded (None)."""
    if execution.status is RunStatus.INVALID:
        return None
    return run_evaluator(cell_mod.sandbox_class(plan.backend), _card(plan), plan.pool_dir,
                         plan.workspace / "submission", plan.run_dir / "evaluator",
                         forbidden=[str(plan.run_dir.parent)])


@task(task_run_name="judge-{plan.run_id}")
def judge_step(plan: CellPlan, execution: Execution, product: ProductScore | None) -> CellScores:
    """S1–S3 judges, Agentic/Overall, error codes."""
    return cell_mod.judge_and_combine(plan, execution, _messages(plan), product)


@task(task_run_name="record-{plan.run_id}")
def record_step(plan: CellPlan, execution: Execution, scores: CellScores) -> CellReport:
    """Write the ledger rows and return the printed report."""
    report = build_report(plan, execution, scores)
    write_ledger(report)
    return report


def run_cell_inline(plan: CellPlan) -> CellReport:
    """The whole cell in one step's body (used by the matrix fan-out)."""
    execution = execute_step.fn(plan)
    product = evaluate_step.fn(plan, execution)
    scores = cell_mod.judge_and_combine(plan, execution, _messages(plan), product)
    return record_step.fn(plan, execution, scores)


@task(task_run_name="cell-{plan.run_id}")
def cell_step(plan: CellPlan) -> CellReport:
    """One matrix cell end to end."""
    return run_cell_inline(plan)


def _card(plan: CellPlan) -> TaskSpec:
    from tasks_lib.imaging.pool import load_task

    return load_task(plan.task_id)


def _messages(plan: CellPlan) -> list[ChatMessage]:
    import json

    data = json.loads((plan.run_dir / "conversation.json").read_text(encoding="utf-8"))
    return [ChatMessage.model_validate(m) for m in data["messages"]]
