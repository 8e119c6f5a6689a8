"""report: the one leaderboard of every track from the ledger alone (never re-scoring): the
score card's columns, mean ± SE over replicates, one ranking rule, cost–score Pareto frontier
per (task, tier), plot, Prefect artifacts."""

from __future__ import annotations

from prefect import flow

from flows import compose
from tasks_lib.report import (
    ReportFiles,
    leaderboard,
    publish_leaderboard,
    report_name,
    scored_runs,
    write_report,
)
from tasks_lib.scoring import select_runs

compose()  # every kit registered, also when a deployment loads this module


@flow(name="report", flow_run_name="report", log_prints=True)
def report(task_id: str | None = None, pool: str | None = None,
           run_ids: list[str] | None = None, evaluator_version: str | None = None
           ) -> ReportFiles:
    """Leaderboard of the scored runs of a pool version, a task or the named runs, from the
    newest score rows (or those of ``evaluator_version``); CSV, markdown, PNG and artifacts."""
    scored = scored_runs(select_runs(run_ids, task_id, pool), evaluator_version)
    rows = leaderboard(scored)
    name = report_name(task_id, pool, evaluator_version)
    publish_leaderboard(rows, name)
    files = write_report(rows, name)
    print(f"report written: {files.markdown} ({len(rows)} rows)")
    return files


def report_qa(pool: str, run_ids: list[str] | None = None) -> ReportFiles:
    """Leaderboard of a QA pool version (former entry point; = ``report(pool=…)``)."""
    return report(pool=pool, run_ids=run_ids)
