"""Run-level commands of every track: ``score run``, ``runs list``, ``report``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from flows.cli.groups import location, report_app, runs_app, score_app, user_errors
from flows.cli.output import echo_json, json_text
from tasks_lib.errors import InputDataError

if TYPE_CHECKING:
    from tasks_lib.report import Board, ReportFiles


@score_app.command("run")
@user_errors()
def score_run_cmd(
    run_id: str = typer.Argument(..., help="Run id (see: medflows runs list)."),
    evaluator_version: str = typer.Option(
        None, help="Show the card stored under this evaluator version instead of scoring with "
        "the current one."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole score card as JSON."),
) -> None:
    """Score one stored run from storage and the ledger alone (append-only score rows)."""
    from tasks_lib.records import card_key as key_of
    from tasks_lib.records import read_card, run_store

    if evaluator_version:
        if not run_store(run_id).exists(key_of(evaluator_version)):
            raise InputDataError(run_id, f"no score card stored under evaluator version "
                                         f"{evaluator_version!r}")
        card = read_card(run_id, evaluator_version)
    else:
        from flows.score import score_run
        from tasks_lib.scoring import load_run

        load_run(run_id)  # an unknown id is one error line, before any flow starts
        card = score_run(run_id)
    if as_json:
        echo_json(card.public_json(), sort_keys=True)
        return
    typer.echo(f"{run_id}: task_score={card.task_score} ({card.evaluator_version}) "
               f"metrics={json_text(card.metrics, indent=None, sort_keys=True)}")


@runs_app.command("list")
@user_errors(kits=False)
def runs_list_cmd(
    task: str = typer.Option(None, "--task", help="Only runs of this task (or QA pool) id."),
    pool: str = typer.Option(None, help="Only runs on this pool version (root folder/URL)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON rows."),
) -> None:
    """Runs in the ledger with their newest score."""
    from tasks_lib.report.board import scored_runs
    from tasks_lib.scoring import select_runs

    rows = select_runs(None, task, location(pool) if pool else None)
    latest = {s.run.run_id: s.score for s in scored_runs(rows)}
    out = [{"run_id": r.run_id, "agent_id": r.agent_id, "task_id": r.task_id,
            "track": r.track, "tier": r.tier, "replicate": r.replicate, "status": r.status,
            "pool_id": r.pool_id, "pool_version": r.pool_version, "cost_usd": r.cost_usd,
            "task_score": latest[r.run_id].task_score if r.run_id in latest else None,
            "evaluator_version": latest[r.run_id].evaluator_version if r.run_id in latest
            else None} for r in rows]
    if as_json:
        echo_json(out)
        return
    for o in out:
        typer.echo(f"{o['run_id']:24} {o['agent_id']:40} {o['task_id']:22} {o['tier']:8} "
                   f"r{o['replicate']} {o['status']:9} score={o['task_score']}")


def leaderboard_report(task: str | None = None, pool: str | None = None,
                       evaluator_version: str | None = None) -> tuple[ReportFiles, Board]:
    """Write the report of ``task``'s or ``pool``'s runs and return its files and board (rows
    and pairwise matrix): through the ``report`` flow when a Prefect API is configured (the run
    and its artifacts are recorded there), else directly, with no Prefect (a report is
    read-only: nothing starts a server for it)."""
    from tasks_lib.report import Board
    from tasks_lib.report.build import build_report, prefect_api_configured, report_board

    if prefect_api_configured():
        from flows.report import report

        files = report(task_id=task, pool=pool, evaluator_version=evaluator_version)
        return files, report_board(task, pool, evaluator_version=evaluator_version)
    built = build_report(task, pool, evaluator_version=evaluator_version)
    return built.files, Board(built.rows, built.pairwise)


def report_json(files: ReportFiles, board: Board) -> dict[str, object]:
    """``report --json``: the files, the rows, the pairwise matrix and how the intervals and
    tests were computed."""
    from evaluators.significance import DEFAULT

    return {"files": files.model_dump(), "rows": [r.model_dump() for r in board.rows],
            "pairwise": [c.model_dump() for c in board.pairwise],
            "statistics": DEFAULT.model_dump()}


@report_app.callback()
@user_errors(kits=False)
def report_cmd(
    ctx: typer.Context,
    task: str = typer.Option(None, "--task", help="Leaderboard of this task's (or QA pool's) "
                                                  "runs."),
    pool: str = typer.Option(None, help="Leaderboard of the runs on this pool version."),
    evaluator_version: str = typer.Option(
        None, help="Use the score rows of this evaluator version (default: each run's newest)."),
    as_json: bool = typer.Option(False, "--json", help="Print the leaderboard rows as JSON."),
    html: str = typer.Option(None, "--html", metavar="DIR",
                             help="Also write the pages of these runs (leaderboards, run "
                                  "viewer) as a static site in DIR (docs/web.md)."),
) -> None:
    """The one leaderboard of any track's runs, from the ledger alone (never re-scores): the
    score card's columns (task score by its metric's name, Overall, S1–S5, named metrics, cost,
    time, replicates, mean ± SE), a bootstrap interval over items per row, a paired test against
    the next row (Holm-adjusted) and the pairwise matrix, ranking and Pareto frontier per
    (task, tier); an invalid run is shown with its reason, unranked and uncredited. CSV,
    markdown, pairwise JSON/CSV, plot; recorded as a
    ``report`` flow run with artifacts when a Prefect API is configured (no server is started
    for a report). ``report qa | medbench | rwe`` are kept as aliases (per-protocol views)."""
    if ctx.invoked_subcommand is not None:
        return
    files, board = leaderboard_report(task, location(pool) if pool else None, evaluator_version)
    site = None
    if html:
        from tasks_lib.web.site import write_site

        site = write_site(html, task, location(pool) if pool else None,
                          evaluator_version=evaluator_version).index_page
    if as_json:
        echo_json({**report_json(files, board), **({"site": str(site)} if site else {})})
        return
    echo_json(files)
    if site:
        typer.echo(f"site: {site}")
