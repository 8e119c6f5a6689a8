"""``medflows score --run R | --pool P | --task T``: re-score stored runs of any kit through the
one score flow (the verb-first form of ``score run|qa|medbench|submission``, which stay as
aliases). Scoring is append-only: a run already scored under the current evaluator version
keeps its row; a new version appends one."""

from __future__ import annotations

import typer

from flows.cli import imaging as imaging  # registers `score submission` (uploads)
from flows.cli import runs as runs  # registers `score run` (one run)
from flows.cli.groups import VERB, fail, location, score_app, split_list, user_errors
from flows.cli.output import echo_json
from flows.cli.routing import Route, forward

ONE_RUN = Route(("score", "run"), list)
"""One run: the card as `medflows score run RUN_ID` prints it."""
UPLOAD = Route(("score", "submission"), list)
"""A submission folder: stored as an upload run of the task's pool, then scored."""


@score_app.command(VERB, hidden=True)
@user_errors()
def score_by_option(
    ctx: typer.Context,
    run: str = typer.Option(None, "--run", help="Run id(s), comma-separated (see: medflows "
                                                "runs list)."),
    pool: str = typer.Option(None, help="Every stored run on this pool version (root "
                                        "folder/URL or active:<subset_id>)."),
    task: str = typer.Option(None, "--task", help="Every stored run of this task id (with "
                                                  "--submission: the upload's task)."),
    submission: str = typer.Option(None, help="Score this submission folder as an upload run "
                                              "of --task (kits that take uploads)."),
    evaluator_version: str = typer.Option(
        None, help="With one --run: show the card stored under this evaluator version."),
    as_json: bool = typer.Option(False, "--json", help="One run: the whole score card as JSON "
                                                       "(several runs always print JSON)."),
) -> None:
    """Score stored runs with the one score flow; one run prints its card, several print one
    JSON row per run."""
    runs = split_list(run) or []
    if submission:
        if not task or runs:
            raise fail("--submission scores an upload of one --task (no --run)")
        extra = ["--pool", pool] if pool else []
        forward(ctx, UPLOAD, ["--task", task, "--submission", submission, *extra,
                              *(["--json"] if as_json else [])])
        return
    if sum(bool(x) for x in (runs, pool, task)) != 1:
        raise fail("give exactly one of --run, --pool and --task")
    if len(runs) == 1:
        version = ["--evaluator-version", evaluator_version] if evaluator_version else []
        forward(ctx, ONE_RUN, [runs[0], *version, *(["--json"] if as_json else [])])
        return
    if evaluator_version:
        raise fail("--evaluator-version shows one stored card: give one --run")
    from flows.score import score_runs

    cards = score_runs(run_ids=runs or None, task_id=task, pool=location(pool) if pool else None)
    echo_json([{"run_id": c.run_id, "agent_id": c.agent_id, "task_id": c.task_id,
                "track": c.track.value, "task_score": c.task_score,
                "primary_metric": c.primary_metric,
                "evaluator_version": c.evaluator_version, "metrics": c.metrics}
               for c in cards])
