"""``medflows pool build --task ID``: build the pool of any kit's task (the verb-first form of
``pool build qa|imaging|challenge|medbench|rwe``, which stay as aliases)."""

from __future__ import annotations

import typer

from flows.cli.groups import VERB, build_app, fail, location, split_list, user_errors
from flows.cli.output import echo_json
from flows.cli.routing import BUILD_ROUTES, Route, forward, route_for, serves
from tasks_lib.errors import InputDataError

PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}
"""Context settings of a verb whose other options belong to the command it forwards to."""
KIT_BUILD = "kit"
"""Hidden command building any kit's task with the generic ``construct`` flow."""
GENERIC = Route(("pool", "build", KIT_BUILD), lambda: [], "--task", many=True)
"""Where ``pool build --task`` sends a kit no route serves (e.g. a kit outside the tree)."""


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
    `medflows pool build <alias> --help`). Prints the alias's JSON summary. A kit no alias
    serves is built by the generic ``construct`` flow (options --pool-id, --out, --seed,
    --audit-override, --json)."""
    ids = split_list(task) or []
    if not ids and not track:
        raise fail("give --task ID (or --track with a kit's own options, e.g. --from DIR)")
    from tasks_lib.tracks.base import task_track

    kit = task_track(ids) if ids else track
    route = GENERIC if ids and not serves(BUILD_ROUTES, kit) else route_for(BUILD_ROUTES, kit)
    args = list(ctx.args) + (["--track", track] if track else [])
    if ids:
        if route.task_option is None or (len(ids) > 1 and not route.many):
            raise InputDataError("--task", f"the {kit} kit builds one pool per task id; give "
                                           "one")
        args += [route.task_option, ",".join(ids)]
    forward(ctx, route, args, kit)


@build_app.command(KIT_BUILD, hidden=True)
@user_errors()
def build_with_kit(
    task: str = typer.Option(..., "--task", help="Task id(s) of one kit (comma-separated)."),
    pool_id: str = typer.Option(None, "--pool-id", help="Pool name (default: the kit's)."),
    out: str = typer.Option(None, help="Pool version root folder/URL (default: "
                                       "pools/<pool_id>/vN in the storage root)."),
    seed: int = typer.Option(None, help="Seed of generated data (default: the kit's)."),
    audit_override: str = typer.Option(
        None, help="Publish even if the exploit audit is not clean; the reason is recorded in "
        "the pool's audit.json (see docs/audit.md)."),
    as_json: bool = typer.Option(False, "--json", help="Also list the cards the pool serves."),
) -> None:
    """Build a task's pool with its kit's ``build`` and the shared audit-and-publish tail (the
    generic ``construct`` flow). Prints JSON: pool_id, version, url, content_hash, n_items,
    track."""
    from flows.construct import construct_pool

    built = construct_pool(split_list(task) or [], pool_id=pool_id,
                           out=location(out) if out else None, seed=seed,
                           audit_override=audit_override)
    m = built.manifest
    summary: dict[str, object] = {"pool_id": m.pool_id, "version": m.version, "url": built.url,
                                  "content_hash": m.content_hash, "n_items": built.n_items,
                                  "track": str(m.track)}
    if as_json:
        summary["cards"] = list(m.cards)
    echo_json(summary)
