"""Prefect steps of the execute DAG's research cells: plan, then execute (agent run → stored
submission, trace, run record and ledger run row). Scoring is the score flow's
(:func:`tasks_lib.harness.rescore.score_cell`)."""

from __future__ import annotations

from itertools import product
from pathlib import Path

from prefect import task

from tasks_lib.domain import Tier
from tasks_lib.errors import InputDataError
from tasks_lib.harness import cell as cell_mod
from tasks_lib.harness.cell import CellPlan
from tasks_lib.harness.record import run_record
from tasks_lib.records import RunRecord
from tasks_lib.sandbox.base import SandboxBackend
from tasks_lib.sandbox.local import SandboxUnavailableError
from tasks_lib.scoring import record_run
from tasks_lib.settings import get_settings
from tasks_lib.tracks.base import kit_for


def _plan(agent_id: str, task_id: str, tier: Tier, backend: SandboxBackend, replicate: int,
          judge: str, pools: dict[str, Path]) -> CellPlan:
    """One cell's plan: the task's kit plans it if it runs its own cells (e.g. RWE studies),
    else the generic plan on the task's newest local pool (``pools`` caches the lookups)."""
    card = cell_mod.task_card(task_id)
    plan = kit_for(card.track).plan_research_cell(agent_id, task_id, tier, backend, replicate,
                                                  judge)
    if plan is not None:
        return plan
    pool = pools.get(task_id) or pools.setdefault(task_id, cell_mod.local_pool_dir(task_id))
    return cell_mod.plan_cell(agent_id, task_id, card.track, tier, backend, replicate, pool,
                              judge, card.time_budget_s)


@task(task_run_name="plan-{agent_id}-{task_id}-{tier}-r{replicate}")
def plan_step(agent_id: str, task_id: str, tier: Tier, backend: SandboxBackend,
              replicate: int, judge_model: str | None) -> CellPlan:
    """Resolve the agent, fix the run id, folders and limits of one cell."""
    return _plan(agent_id, task_id, tier, backend, replicate,
                 judge_model or get_settings().judge_model, {})


@task(task_run_name="plan-grid")
def plan_grid_step(agents: list[str], tasks: list[str], tiers: list[Tier], replicates: int,
                   backend: SandboxBackend, judge_model: str | None) -> list[CellPlan]:
    """Plans of every cell agents × tasks × tiers × replicates (each task's pool must exist);
    a kit that plans its own cells (:meth:`~tasks_lib.tracks.base.TrackKit.plan_research_cell`,
    e.g. RWE studies) is asked first."""
    judge = judge_model or get_settings().judge_model
    pools: dict[str, Path] = {}
    return [_plan(a, t, tier, backend, r, judge, pools)
            for a, t, tier, r in product(agents, tasks, tiers, range(replicates))]


@task(task_run_name="execute-{plan.run_id}")
def execute_step(plan: CellPlan) -> RunRecord:
    """Run the agent in its sandbox (fresh workspace); store submission, trace and
    ``run.json``, and upsert the ledger's run row (cost is kept whatever scoring does).

    The row is written whatever the agent did to the host steps: :func:`execute_cell` turns
    its own failures into an invalid/error status with the reason, and anything that still
    escapes it is recorded here as an ``error`` run (user mistakes and a missing sandbox
    program are raised as before). A kit that executes its own cells (RWE) runs and records
    the plan itself (:meth:`~tasks_lib.tracks.base.TrackKit.execute_research_cell`)."""
    own = kit_for(plan.track).execute_research_cell(plan)
    if own is not None:
        return own
    try:
        execution = cell_mod.execute_cell(plan)
    except (InputDataError, SandboxUnavailableError):
        raise
    except Exception as exc:
        execution = cell_mod.crashed_execution(plan, exc)
    record = run_record(plan, execution)
    record_run(record)
    return record
