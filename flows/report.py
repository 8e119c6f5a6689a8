"""report: the one leaderboard of every track from the ledger (never re-scoring): the score
card's columns, mean ± SE over replicates, bootstrap intervals and paired tests over items, one
ranking rule, cost–score Pareto frontier per (task, tier), pairwise matrix, plot, Prefect
artifacts.

The work is plain functions (:mod:`tasks_lib.report.build`) that the CLI also calls without
Prefect; this flow runs them as steps and is the one place that makes the report's Prefect
artifacts (deployments, the pipeline and the CLI on a configured Prefect API run it)."""

from __future__ import annotations

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from flows import compose
from tasks_lib.artifacts import artifact_key
from tasks_lib.report import LeaderboardRow, PairwiseCell, ReportFiles, report_board, report_name
from tasks_lib.report.render import artifact_markdown, flat_record, write_report

compose()  # every kit registered, also when a deployment loads this module


@task(name="publish-leaderboard", task_run_name="publish-leaderboard-{name}")
def publish_leaderboard(rows: list[LeaderboardRow], name: str) -> None:
    """The leaderboard as a Prefect table artifact."""
    create_table_artifact(
        key=artifact_key(f"leaderboard-{name}"),
        table=[flat_record(r) for r in rows],
        description=f"Leaderboard of {name} (mean ± SE over replicates, bootstrap interval, "
                    "paired test against the next row, cost, Pareto frontier)",
    )


@task(name="write-report", task_run_name="write-report-{name}")
def write_report_files(rows: list[LeaderboardRow], name: str,
                       pairwise: list[PairwiseCell]) -> ReportFiles:
    """Write CSV, markdown, pairwise matrix and PNG under ``reports/<name>/``; a markdown
    artifact links them."""
    files = write_report(rows, name, pairwise)
    create_markdown_artifact(key=artifact_key(f"report-{name}"),
                             markdown=artifact_markdown(rows, name, files))
    return files


@flow(name="report", flow_run_name="report", log_prints=True)
def report(task_id: str | None = None, pool: str | None = None,
           run_ids: list[str] | None = None, evaluator_version: str | None = None
           ) -> ReportFiles:
    """Leaderboard of the scored runs of a pool version, a task or the named runs, from the
    newest score rows (or those of ``evaluator_version``); CSV, markdown, pairwise matrix, PNG
    and artifacts."""
    rows, pairwise = report_board(task_id, pool, run_ids, evaluator_version)
    name = report_name(task_id, pool, evaluator_version)
    publish_leaderboard(rows, name)
    files = write_report_files(rows, name, pairwise)
    print(f"report written: {files.markdown} ({len(rows)} rows)")
    return files


def report_qa(pool: str, run_ids: list[str] | None = None) -> ReportFiles:
    """Leaderboard of a QA pool version (former entry point; = ``report(pool=…)``)."""
    return report(pool=pool, run_ids=run_ids)
