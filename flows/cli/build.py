"""``medflows pool build --task ID``: build the pool of any kit's task (the verb-first form of
``pool build qa|imaging|challenge|medbench|rwe``, which stay as aliases)."""

from __future__ import annotations

import typer

from flows.cli.groups import VERB, build_app, fail, split_list, user_errors
from flows.cli.routing import BUILD_ROUTES, forward, route_for, task_track
from tasks_lib.errors import InputDataError

PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}
"""Context settings of a verb whose other options belong to the command it forwards to."""


@build_app.command(VERB, hidden=True, context_settings=PASS_THROUGH)
@user_errors()
def build_by_task(
    ctx: typer.Context,
    task: str = typer.Option(None, "--task", help="Task id; several (comma-separated) where "
                             "the kit builds one pool of several cards (QA datasets, MedBench "
                             "tasks, RWE studies)."),
    track: str = typer.Option(None, "--track", help="Without --task: the kit that builds from "
                              "the other options (e.g. --track segmentation --from DIR)."),
) -> None:
    """Build the pool of a task: its card names the kit, whose build command takes every other
    option (common ones: --out, --pool-id, --seed, --audit-override, --json; the rest:
    `medflows pool build <alias> --help`). Prints the alias's JSON summary."""
    ids = split_list(task) or []
    if not ids and not track:
        raise fail("give --task ID (or --track with a kit's own options, e.g. --from DIR)")
    kit = task_track(ids) if ids else track
    route = route_for(BUILD_ROUTES, kit)
    args = list(ctx.args) + (["--track", track] if track else [])
    if ids:
        if route.task_option is None or (len(ids) > 1 and not route.many):
            raise InputDataError("--task", f"the {kit} kit builds one pool per task id; give "
                                           "one")
        args += [route.task_option, ",".join(ids)]
    forward(ctx, route, args, kit)
