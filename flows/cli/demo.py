"""``medflows demo``: every protocol of the platform on small embedded data (:mod:`flows.demo`),
or one of them; progress on stderr, the summary table (or ``--json``) on stdout."""

from __future__ import annotations

import typer

from flows.cli.groups import app, split_list, user_errors
from flows.cli.output import json_text
from tasks_lib.errors import InputDataError

CHOICES = ("all", "qa", "imaging", "challenge", "medbench", "rwe")


@app.command("demo")
@user_errors()
def demo(
    protocol: str = typer.Option("all", help="all | qa | imaging | challenge | medbench | rwe "
                                             "(comma-separated for several). qa alone is the "
                                             "full MedAgentsBench demo (862 hard questions)."),
    per_dataset: int = typer.Option(None, min=1, help="QA: hard questions per dataset (default "
                                                      "100 with --protocol qa, else 20)."),
    rebuild: bool = typer.Option(False, help="Build every pool anew (default: reuse the pools "
                                             "an earlier demo built while they are usable)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary rows as JSON."),
) -> None:
    """Show the platform working: a QA replay leaderboard, an imaging submission scored, a
    challenge cell graded and placed, a MedBench upload scored, an RWE study run by an honest and
    a fabricating agent; ends with one summary table and each report's path."""
    names = split_list(protocol) or ["all"]
    unknown = [n for n in names if n not in CHOICES]
    if unknown:
        raise InputDataError("--protocol", f"unknown {', '.join(unknown)}; known: "
                                           f"{', '.join(CHOICES)}")
    from flows.demo import PROTOCOLS, run_demo
    from tasks_lib.demo import summary_table

    chosen = list(PROTOCOLS) if "all" in names else [p for p in PROTOCOLS if p in names]
    started = _now()
    rows = run_demo(chosen, lambda line: typer.echo(line, err=True), per_dataset, rebuild)
    if as_json:
        typer.echo(json_text([r.model_dump(mode="json") for r in rows], indent=2))
        return
    if chosen == ["qa"] and rows[0].report:
        _qa_leaderboard(rows[0].report, rows[0].pool or "")
    typer.echo(summary_table(rows, _now() - started))


def _now() -> float:
    import time

    return time.monotonic()


def _qa_leaderboard(markdown_url: str, pool_url: str) -> None:
    """What ``medflows demo`` printed before it showed every protocol: the QA leaderboard,
    how many agents it ranks and the report's files."""
    from tasks_lib.storage import Storage

    folder, _ = markdown_url.rsplit("/", 1)
    root = Storage(folder)
    typer.echo(root.read_text("leaderboard.md"))
    rows = root.read_text("leaderboard.csv").count("\n") - 1
    typer.echo(f"{rows} (model, method) agents scored on pool {pool_url}")
    typer.echo(f"report: {markdown_url}\n        {folder}/leaderboard.csv\n"
               f"        {folder}/cost_accuracy.png\n")
