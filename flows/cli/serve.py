"""``medflows serve``: the MedBench v4 HTTP service (FastAPI + uvicorn, 127.0.0.1 by default)."""

from __future__ import annotations

import typer

from flows.cli.groups import app, user_errors


@app.command("serve")
@user_errors()
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to bind (default: this machine only)."),
    port: int = typer.Option(8765, help="Port."),
    subset: str = typer.Option(None, help="Default split source: active:<subset_id> (or the "
                                          "id); requests may name another subset."),
    pool: str = typer.Option(None, help="Default split source: a pool version root."),
    trusted_proxies: str = typer.Option(
        None, "--trusted-proxies", help="Comma-separated addresses of reverse proxies whose "
        "X-Forwarded-For is believed (default: none; the failed-key throttle counts per "
        "client address, so an untrusted header must not choose it)."),
) -> None:
    """Serve MedBench v4 over HTTP: submitters (API keys, rate limits), model endpoints,
    randomized splits, version-locked uploads scored by the score flow, scores; and the web
    pages: leaderboards with intervals, the run viewer, a submitter's own submissions
    (docs/web.md)."""
    import uvicorn

    from flows.cli.medbench_upload_mode import split_source
    from flows.score import score_run
    from tasks_lib.medbench.service import create_app
    from tasks_lib.services import ServiceKind, running_here

    default = split_source(subset, pool) if subset or pool else None
    typer.echo(f"medflows MedBench service on http://{host}:{port} (default pool: "
               f"{default or 'none'})", err=True)
    with running_here(ServiceKind.SERVE, f"http://{host}:{port}", name=str(port)):
        uvicorn.run(create_app(score_run, default), host=host, port=port, log_level="warning",
                    proxy_headers=bool(trusted_proxies),
                    forwarded_allow_ips=trusted_proxies or "")
