"""``medflows review``: answer a construct run waiting for expert review."""

from __future__ import annotations

from uuid import UUID

import typer

from flows.cli.groups import app, fail


@app.command("review")
def review(
    flow_run_id: str = typer.Argument(..., help="Id of the paused construct flow run."),
    reviewer: str = typer.Option(..., help="Your name (recorded with the pool)."),
    reject: bool = typer.Option(False, help="Reject the whole batch (nothing is published)."),
    item: list[str] = typer.Option(None, help="KEY=approve|reject for a flagged item; repeat."),
    comment: str = typer.Option("", help="Why."),
) -> None:
    """Resume a paused construct run with your decision (same form as the Prefect UI)."""
    from prefect.exceptions import FlowPauseTimeout, NotPausedError
    from prefect.flow_runs import resume_flow_run

    decisions = {}
    for entry in item or []:
        key, sep, verdict = entry.rpartition("=")
        if not sep or verdict not in ("approve", "reject"):
            raise fail(f"--item must look like dataset/realidx=approve|reject, got {entry!r}")
        decisions[key] = verdict
    answer = {"reviewer": reviewer, "batch": "reject" if reject else "approve",
              "decisions": decisions, "comment": comment}
    try:
        resume_flow_run(UUID(flow_run_id), run_input=answer)
    except (NotPausedError, FlowPauseTimeout, ValueError) as exc:
        raise fail(f"cannot resume {flow_run_id}: {exc}") from None
    typer.echo(f"resumed {flow_run_id} ({answer['batch']}, {len(decisions)} item decisions)")
