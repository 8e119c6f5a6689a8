"""Prefect step of an RWE research cell: plan, execute (role created and dropped), store the run
record and the ledger's run row. Scoring is the one score flow's (the RWE kit)."""

from __future__ import annotations

from prefect import task

from tasks_lib.domain import RunStatus, Tier
from tasks_lib.errors import InputDataError
from tasks_lib.harness.cell import CellPlan, Execution, local_root
from tasks_lib.records import RunRecord
from tasks_lib.rwe.cell import execute_rwe_cell, plan_rwe_cell, rwe_run_record
from tasks_lib.rwe.pools import LoadedStudy, load_study
from tasks_lib.sandbox.base import SandboxBackend
from tasks_lib.sandbox.local import SandboxUnavailableError
from tasks_lib.scoring import record_run
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage


@task(task_run_name="execute-rwe-{agent_id}-{study_id}-r{replicate}")
def rwe_execute_step(agent_id: str, study_id: str, tier: str = "lite", sandbox: str = "local",
                     replicate: int = 0, judge_model: str | None = None,
                     pool: str | None = None) -> RunRecord:
    """Run one agent on one study (newest pool holding it, or ``pool``) and record the run.

    A host-side crash after the plan is recorded as an ``error`` run with its reason (the role
    is dropped either way); user mistakes and a missing sandbox program are raised."""
    loaded = load_study(study_id, pool)
    plan = plan_rwe_cell(agent_id, study_id, Tier(tier), SandboxBackend(sandbox), replicate,
                         local_root(Storage(loaded.pool_url)),
                         judge_model or get_settings().judge_model)
    return run_rwe_plan(plan, loaded)


def run_rwe_plan(plan: CellPlan, loaded: LoadedStudy) -> RunRecord:
    """Execute a planned RWE cell on its loaded study, then store and ledger the run record
    (a host-side crash after the plan becomes an ``error`` run with its reason)."""
    try:
        execution = execute_rwe_cell(plan, loaded)
    except (InputDataError, SandboxUnavailableError):
        raise
    except Exception as exc:  # our side failed mid-run: keep the run row with the reason
        execution = Execution(status=RunStatus.ERROR, end=None, model=plan.agent.model,
                              turns=0, wall_time_s=0.0, input_tokens=0, output_tokens=0,
                              violations=[], error=f"host: {type(exc).__name__}: {exc}"[:500])
    record = rwe_run_record(plan, loaded, execution)
    record_run(record)
    return record
