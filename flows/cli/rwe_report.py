"""``medflows report rwe``: the RWE view of the one leaderboard (ACC, RAR, SMR, SR, SR after
screening, Steps, CR per agent, mean ± SE over replicates) from the ledger's score rows."""

from __future__ import annotations

import typer

from flows.cli.groups import location, report_app, split_list, user_errors
from flows.cli.output import echo_json


@report_app.command("rwe")
@user_errors(kits=False)
def report_rwe_cmd(
    task: str = typer.Option(None, "--task", help="Comma-separated study ids (default: all "
                                                  "RWE runs)."),
    pool: str = typer.Option(None, help="Only the runs on this RWE pool version."),
    evaluator_version: str = typer.Option(None, help="Use the score rows of this evaluator "
                                                     "version (default: each run's newest)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """RWE view (alias kept beside ``medflows report --task STUDY``): the RWE-bench table per
    agent from the ledger alone (never re-scores); an invalid run is shown with its reason,
    unranked and uncredited."""
    from tasks_lib.rwe.report import markdown, rwe_report

    report = rwe_report(split_list(task), location(pool) if pool else None, evaluator_version)
    if as_json:
        echo_json(report)
        return
    typer.echo(markdown(report))
