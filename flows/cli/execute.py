"""``medflows execute --pool P --agents A,B``: run agents on any kit's pool (the verb-first form
of ``execute qa|medbench`` and ``run matrix``, which stay as aliases)."""

from __future__ import annotations

import typer

from flows.cli import run as run  # registers `run matrix`, where research cells go
from flows.cli.build import PASS_THROUGH
from flows.cli.groups import VERB, execute_app, location, split_list, user_errors
from flows.cli.routing import EXECUTE_ROUTES, Route, forward, pool_track, route_for

CELLS = Route(("run", "matrix"), list)
"""Where research cells (agent × task × tier × replicate in a sandbox) run."""


@execute_app.command(VERB, hidden=True, context_settings=PASS_THROUGH)
@user_errors(kits=False)  # registered below, unless a warm child runs the command
def execute_by_pool(
    ctx: typer.Context,
    pool: str = typer.Option(..., help="Published pool root folder/URL, or active:<subset_id>."),
) -> None:
    """Run agents on a pool: the ledger names the pool's kit, whose execute command takes every
    other option (common ones: --agents, --replicates; the rest: `medflows execute qa|medbench
    --help`, `medflows run matrix --help`). Prints JSON."""
    from tasks_lib.warm_start import hand_off_command

    if (code := hand_off_command()) is not None:  # after `medflows server start`
        raise typer.Exit(code)
    from flows import compose
    from tasks_lib.prefect_server import start_temporary

    server = start_temporary()  # boots in its own process while this one imports
    compose()  # the routes of some kits are the kits registered (imaging)
    kit = pool_track(location(pool))
    if server is not None:
        server.wait()
    forward(ctx, route_for(EXECUTE_ROUTES, kit), [*ctx.args, "--pool", pool], kit)


@execute_app.command("cells", hidden=True, context_settings=PASS_THROUGH)
@user_errors()
def execute_cells(
    ctx: typer.Context,
    pool: str = typer.Option(..., help="Published pool root folder/URL (its newest version)."),
    task: str = typer.Option(None, "--task", help="Only these of the pool's task ids "
                                                  "(comma-separated; default all)."),
) -> None:
    """Research cells on the tasks a pool holds, through `medflows run matrix` (cells run on
    the newest published version of the pool, so an older version is refused)."""
    from tasks_lib.execution.steps import cell_tasks

    url = location(pool)
    ids = cell_tasks(url, split_list(task))
    forward(ctx, CELLS, [*ctx.args, "--json", "--tasks", ",".join(ids)], pool_track(url))
