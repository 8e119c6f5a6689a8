"""``medflows services status|stop`` and ``medflows server start|stop|status``: the long-lived
processes medflows started (:mod:`tasks_lib.services`) and the local Prefect server later
commands reuse (:mod:`tasks_lib.prefect_server`)."""

from __future__ import annotations

import typer

from flows.cli.groups import app, fail
from flows.cli.output import echo_json

services_app = typer.Typer(no_args_is_help=True,
                           help="What medflows started and left running: list it, stop it.")
server_app = typer.Typer(no_args_is_help=True,
                         help="A local Prefect server that later commands reuse.")
app.add_typer(services_app, name="services")
app.add_typer(server_app, name="server")


def _print_rows(as_json: bool, kind: str | None = None) -> None:
    from tasks_lib.services import ServiceKind, status

    rows = [r for r in status() if kind is None or r.kind is ServiceKind(kind)]
    if as_json:
        echo_json({"services": rows})
        return
    if not rows:
        typer.echo("nothing running")
    for r in rows:
        kept = " (kept)" if r.keep else ""
        by = r.started_by or "origin unknown"
        typer.echo(f"{r.key:<24} {r.state.value:<8} pid {r.pid:<8} {r.address}{kept}"
                   f"\n{'':<24} started {r.started_at:%Y-%m-%d %H:%M:%S} UTC by {by}")


@services_app.command("status")
def services_status(
    as_json: bool = typer.Option(False, "--json", help="Print the services as JSON."),
) -> None:
    """List what medflows started (RWE cluster, local Prefect server, serve) and whether it
    still runs; a record whose process is gone is shown once as stale and removed."""
    _print_rows(as_json)


@services_app.command("stop")
def services_stop(
    kind: str = typer.Argument(None, help="rwe-cluster, prefect-server or serve."),
    stop_all: bool = typer.Option(False, "--all", help="Stop every service medflows started."),
    as_json: bool = typer.Option(False, "--json", help="Print the stopped services as JSON."),
) -> None:
    """Stop services by PID: SIGTERM, then SIGKILL after a bounded wait (the RWE cluster: its
    fast shutdown, never a kill)."""
    from tasks_lib.services import ServiceError, ServiceKind, stop

    kinds = [k.value for k in ServiceKind]
    if (kind is None) == (not stop_all):
        raise fail(f"name one kind ({', '.join(kinds)}) or --all")
    if kind is not None and kind not in kinds:
        raise fail(f"unknown service kind {kind!r}; known: {', '.join(kinds)}")
    try:
        stopped = stop(ServiceKind(kind) if kind else None)
    except ServiceError as exc:
        raise fail(str(exc), code=1) from None
    if as_json:
        echo_json({"stopped": [{"kind": s.kind, "key": s.key, "pid": s.pid} for s in stopped]})
        return
    for s in stopped:
        typer.echo(f"stopped {s.key} (pid {s.pid})")
    if not stopped:
        typer.echo("nothing to stop")


@server_app.command("start")
def server_start(
    port: int = typer.Option(None, help="Port on 127.0.0.1 (default: a free one)."),
    as_json: bool = typer.Option(False, "--json", help="Print the server as JSON."),
) -> None:
    """Start a local Prefect server (or show the running one): later commands run their flows
    on it instead of a temporary server, until `medflows server stop`."""
    from tasks_lib.prefect_server import start
    from tasks_lib.services import ServiceError

    try:
        service, started = start(port)
    except ServiceError as exc:
        raise fail(str(exc), code=1) from None
    if as_json:
        echo_json({"api_url": service.address, "pid": service.pid, "started": started,
                   "prefect_home": service.home})
        return
    verb = "started" if started else "already running"
    typer.echo(f"local Prefect server {verb}: {service.address} (pid {service.pid}); "
               f"flow runs are kept in {service.home}; stop it with medflows server stop")


@server_app.command("stop")
def server_stop() -> None:
    """Stop the local Prefect server (its flow and task runs stay in its database)."""
    from tasks_lib.prefect_server import stop_server
    from tasks_lib.services import ServiceError

    try:
        stopped = stop_server()
    except ServiceError as exc:
        raise fail(str(exc), code=1) from None
    typer.echo("\n".join(f"stopped the local Prefect server (pid {s.pid})" for s in stopped)
               or "no local Prefect server is running")


@server_app.command("status")
def server_status(
    as_json: bool = typer.Option(False, "--json", help="Print the server as JSON."),
) -> None:
    """Show the local Prefect server, if one runs."""
    _print_rows(as_json, "prefect-server")
