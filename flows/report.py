"""report: leaderboard, cost–performance Pareto frontier, plot, Prefect artifacts."""

from __future__ import annotations

from prefect import flow

from tasks_lib.qa.planning import find_runs, read_manifest
from tasks_lib.qa.report import ReportFiles, leaderboard, write_report
from tasks_lib.qa.run_steps import score_run


@flow(name="report-qa", flow_run_name="report-qa", log_prints=True)
def report_qa(pool: str, run_ids: list[str] | None = None) -> ReportFiles:
    """Leaderboard of the scored runs on a pool, written as CSV, markdown and PNG."""
    manifest = read_manifest(pool)
    runs = find_runs(manifest, run_ids)
    cards = [score_run(r, pool, manifest.content_hash) for r in runs]
    rows = leaderboard(runs, cards)
    files = write_report(rows, f"{manifest.pool_id}-v{manifest.version}")
    print(f"report written: {files.markdown}")
    return files
