"""Prefect steps of the execute DAG's research cells: plan, then execute (agent run → stored
submission, trace, run record and ledger run row). Scoring is the score flow's
(:func:`tasks_lib.harness.rescore.score_cell`)."""

from __future__ import annotations

from itertools import product

from prefect import task

from tasks_lib.domain import Tier
from tasks_lib.errors import InputDataError
from tasks_lib.harness import cell as cell_mod
from tasks_lib.harness.cell import CellPlan
from tasks_lib.harness.environment import Environment
from tasks_lib.harness.record import run_record
from tasks_lib.records import RunRecord
from tasks_lib.sandbox.base import SandboxBackend
from tasks_lib.sandbox.local import SandboxUnavailableError
from tasks_lib.scoring import record_run
from tasks_lib.settings import get_settings
from tasks_lib.taskspec import Budget
from tasks_lib.tracks.base import find_card, kit_for


def _plan(agent_id: str, task_id: str, tier: Tier, backend: SandboxBackend, replicate: int,
          judge: str, envs: dict[str, Environment], budget: Budget | None) -> CellPlan:
    """One cell's plan in its kit's environment for the task (on the newest pool serving the
    task; ``envs`` caches the lookups), under the run's own ``budget``."""
    if task_id not in envs:
        card = find_card(task_id)
        envs[task_id] = kit_for(card.track).environment(card)
    return cell_mod.plan_cell(agent_id, envs[task_id], tier, backend, replicate, judge, budget)


@task(task_run_name="plan-{agent_id}-{task_id}-{tier}-r{replicate}")
def plan_step(agent_id: str, task_id: str, tier: Tier, backend: SandboxBackend,
              replicate: int, judge_model: str | None, budget: Budget | None = None) -> CellPlan:
    """Resolve the agent, fix the run id, folders and limits of one cell (``budget``: the
    run's own caps over the card's)."""
    return _plan(agent_id, task_id, tier, backend, replicate,
                 judge_model or get_settings().judge_model, {}, budget)


@task(task_run_name="plan-grid")
def plan_grid_step(agents: list[str], tasks: list[str], tiers: list[Tier], replicates: int,
                   backend: SandboxBackend, judge_model: str | None,
                   budget: Budget | None = None) -> list[CellPlan]:
    """Plans of every cell agents × tasks × tiers × replicates (each task's pool must exist;
    ``budget``: every run's own caps over the cards')."""
    judge = judge_model or get_settings().judge_model
    envs: dict[str, Environment] = {}
    return [_plan(a, t, tier, backend, r, judge, envs, budget)
            for a, t, tier, r in product(agents, tasks, tiers, range(replicates))]


@task(task_run_name="execute-{plan.run_id}")
def execute_step(plan: CellPlan) -> RunRecord:
    """Run the agent in its sandbox (fresh workspace); store submission, trace and
    ``run.json``, and upsert the ledger's run row (cost is kept whatever scoring does).

    The row is written whatever the agent did to the host steps: :func:`execute_cell` turns
    its own failures into an invalid/error status with the reason, and anything that still
    escapes it is recorded here as an ``error`` run (user mistakes and a missing sandbox
    program are raised as before). Every track's cell runs here, in its kit's environment
    (:mod:`tasks_lib.harness.environment`)."""
    env = cell_mod.cell_environment(plan)
    pool = env.pool()
    try:
        execution = cell_mod.execute_cell(plan, env)
    except (InputDataError, SandboxUnavailableError):
        raise
    except Exception as exc:
        execution = cell_mod.crashed_execution(plan, exc)
    record = run_record(plan, execution, pool)
    record_run(record)
    return record
