"""Execute a planned RWE research cell (role created and dropped) and store its run record and
the ledger's run row; the RWE kit's ``execute_research_cell`` calls it. Scoring is the one
score flow's (the RWE kit)."""

from __future__ import annotations

from tasks_lib.domain import RunStatus
from tasks_lib.errors import InputDataError
from tasks_lib.harness.cell import CellPlan, Execution
from tasks_lib.records import RunRecord
from tasks_lib.rwe.cell import execute_rwe_cell, rwe_run_record
from tasks_lib.rwe.pools import LoadedStudy
from tasks_lib.sandbox.local import SandboxUnavailableError
from tasks_lib.scoring import record_run


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
