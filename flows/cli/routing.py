"""How the verb-first commands (``pool build --task``, ``execute --pool``) find the command that
does the work for a task's or pool's kit, without naming a track.

Each protocol's command module registers a :class:`Route` (the command it forwards to — today's
per-protocol verb, kept as an alias — and the kits it serves). The verb asks the card (a task id)
or the ledger (a pool) for the kit, takes the one route serving it and forwards every other
option unchanged, so the verb and its alias print the same output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from typer._click import Command, Context
from typer._click.exceptions import NoSuchOption, UsageError
from typer.core import TyperGroup

from evaluators.registry import Registry
from flows.cli.groups import fail
from tasks_lib.errors import InputDataError


class Route(NamedTuple):
    """Where a verb sends a kit's tasks or pools."""

    path: tuple[str, ...]
    """The command forwarded to, from the root (e.g. ``("pool", "build", "qa")``)."""
    tracks: Callable[[], list[str]]
    """Names of the kits this route serves (asked when a verb runs, after every kit
    registered)."""
    task_option: str | None = None
    """The target's option receiving the ``--task`` ids (None: the target takes none)."""
    many: bool = False
    """The target builds one pool from several task ids (comma-separated)."""


BUILD_ROUTES: Registry[Route] = Registry("pool build route")
"""Routes of ``medflows pool build --task``, keyed by route name."""
EXECUTE_ROUTES: Registry[Route] = Registry("execute route")
"""Routes of ``medflows execute --pool``, keyed by route name."""


def serves(routes: Registry[Route], track: str) -> bool:
    """Whether some route of ``routes`` serves ``track``'s kit."""
    return any(track in routes.get(name).tracks() for name in routes)


def route_for(routes: Registry[Route], track: str) -> Route:
    """The one route serving ``track``'s kit (none: an error naming the served kits; two: a
    registration bug)."""
    served = [name for name in routes if track in routes.get(name).tracks()]
    if not served:
        known = sorted({t for name in routes for t in routes.get(name).tracks()})
        raise InputDataError(track, f"no {routes.kind} serves this kit (served: "
                                    f"{', '.join(known)})")
    if len(served) > 1:
        raise ValueError(f"{routes.kind}s {', '.join(served)} all serve {track!r}")
    return routes.get(served[0])


def pool_track(pool: str) -> str:
    """The kit of a published pool (a root folder/URL or ``active:<subset_id>``), from the
    ledger row its publication wrote (:func:`tasks_lib.execution.steps.pool_kit_name`)."""
    from tasks_lib.execution.steps import pool_kit_name

    return pool_kit_name(pool)


def forward(ctx: Context, route: Route, args: list[str], kit: str | None = None) -> None:
    """Run the route's command with ``args`` as if typed after it; a usage mistake (e.g. an
    option this kit's command does not take) is one ``error:`` line naming the options it
    takes."""
    command: Command = ctx.find_root().command
    for name in route.path:
        assert isinstance(command, TyperGroup)
        command = command.commands[name]
    try:
        sub = command.make_context(" ".join(route.path), list(args), parent=ctx)
    except UsageError as exc:
        takes = sorted(o for p in command.params for o in p.opts if o.startswith("--"))
        owner = f"the {kit} kit's " if kit else ""
        what = (f"{exc.option_name}: not an option here" if isinstance(exc, NoSuchOption)
                else exc.format_message())
        raise fail(f"{what} ({owner}`medflows {' '.join(route.path)}` takes "
                   f"{', '.join(takes)})") from None
    with sub:
        command.invoke(sub)
