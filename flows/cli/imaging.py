"""Imaging commands: ``pool build imaging``, ``score submission``, ``baseline``."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from flows.cli.groups import app, build_app, location, score_app, user_errors
from tasks_lib.imaging.baselines import BaselineKind


def ensure_pool(task_id: str, pool: str | None) -> str:
    """The pool URL (``--pool`` or the default), built by the construct DAG if absent."""
    from flows.construct import ensure_imaging_pool

    return ensure_imaging_pool(task_id, location(pool) if pool else None)


@build_app.command("imaging")
@user_errors()
def build_imaging(
    task: str = typer.Option(..., "--task", help="Imaging task id (see datasets/<track>/)."),
    out: str = typer.Option(None, help="Pool root folder/URL (default in the storage root)."),
) -> None:
    """Build an imaging task's pool (public view + private references); prints JSON."""
    from flows.construct import construct_imaging
    from tasks_lib.imaging.pool import default_pool_url, load_task

    load_task(task)
    manifest = construct_imaging(task, location(out) if out else default_pool_url(task))
    typer.echo(json.dumps({"task_id": task, "manifest": manifest}, indent=2))


@score_app.command("submission")
@user_errors()
def score_submission_cmd(
    task: str = typer.Option(..., "--task", help="Imaging task id."),
    submission: str = typer.Option(..., help="Submission folder."),
    pool: str = typer.Option(None, help="Pool root (default: built in the storage root)."),
    as_json: bool = typer.Option(False, "--json", help="Print the full score card as JSON."),
    dask: bool = typer.Option(None, help="Force Dask on/off (default: the card's policy)."),
    run_id: str = typer.Option(None, help="Ledger run to append the score to (must exist)."),
) -> None:
    """Score one submission folder (score DAG) and print its score card."""
    from flows.score import score_submission
    from tasks_lib.imaging.pool import load_task

    load_task(task)
    url = ensure_pool(task, pool)
    card = score_submission(task, str(Path(submission).absolute()), url, dask, run_id)
    if as_json:
        typer.echo(json.dumps(card.public_json(), indent=2, sort_keys=True))
        return
    typer.echo(f"{card.task_id}: task_score={card.task_score:.4f} s4={card.s4} s5={card.s5} "
               f"validation={'ok' if card.validation.ok else 'FAILED'}")


@app.command("baseline")
@user_errors()
def baseline_cmd(
    task: str = typer.Option(..., "--task", help="Imaging task id."),
    kind: BaselineKind = typer.Option(..., help="perfect | empty | constant | classical."),
    out: Path = typer.Option(..., help="Submission folder to write."),
    pool: str = typer.Option(None, help="Pool root (default: built in the storage root)."),
) -> None:
    """Write a baseline submission (validate evaluators with it before real runs)."""
    from tasks_lib.imaging.baselines import write_baseline
    from tasks_lib.imaging.pool import load_task

    load_task(task)
    files = write_baseline(kind, ensure_pool(task, pool), out)
    typer.echo(json.dumps({"task_id": task, "kind": kind.value, "submission": str(out.resolve()),
                           "files": len(files)}, indent=2))
