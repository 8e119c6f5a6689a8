"""Operations commands: ``pool rotate``, ``deploy``, ``rerun`` (logic in :mod:`tasks_lib.ops`)."""

from __future__ import annotations

import typer

from flows.cli.groups import app, fail, pool_app, split_list, user_errors
from flows.cli.output import echo_json
from tasks_lib.errors import InputDataError


@pool_app.command("rotate")
def pool_rotate(
    pools: str = typer.Option(..., help="Comma-separated parent pools of one track: ID (newest) "
                                        "or ID@vN."),
    size: int = typer.Option(..., min=0, help="Units in the subset: questions, base items, "
                                              "cases or studies (small strata stay whole)."),
    seed: int = typer.Option(None, help="Sampling seed (default: quarter of today, YYYYQ)."),
    subset_id: str = typer.Option(None, help="Subset name (runs and scores name it; default: "
                                             "<track>-rotation, e.g. qa-rotation)."),
    stratify_by: str = typer.Option(None, help="Stratum fields, comma-separated (default: the "
                                               "track's: QA dataset,meta_info; MedBench "
                                               "task,specialty; RWE design; imaging and "
                                               "challenge: one stratum)."),
    activate: bool = typer.Option(True, help="Make the subset the active one."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole subset manifest."),
) -> None:
    """Draw a version-locked, stratified evaluation subset of any kind of pool (rotate flow;
    `medflows medbench rotate` is an alias for MedBench pools)."""
    from flows.rotate import rotate_pool

    try:
        subset = rotate_pool(pools=split_list(pools) or [], size=size, seed=seed,
                             subset_id=subset_id, stratify_by=split_list(stratify_by),
                             activate=activate)
    except (InputDataError, ValueError) as exc:
        raise fail(str(exc)) from None
    if as_json:
        echo_json(subset)
        return
    echo_json({"subset_id": subset.subset_id, "version": subset.version,
               "content_hash": subset.content_hash, "n_items": subset.n_items,
               "url": subset.url})


@app.command("deploy")
@user_errors()
def deploy(
    apply: bool = typer.Option(False, "--apply", help="Register every deployment and its pool."),
    list_: bool = typer.Option(False, "--list", help="List registered medflows deployments."),
    as_json: bool = typer.Option(False, "--json", help="JSON output for --list."),
) -> None:
    """Register (``--apply``) or list (``--list``) the deployments of deployments/prefect.yaml
    against ``PREFECT_API_URL``."""
    from prefect.settings import PREFECT_API_URL

    from tasks_lib.ops import apply_deployments, list_deployments, project_file

    if not (apply or list_):
        raise fail("choose --apply and/or --list")
    if not PREFECT_API_URL.value():
        raise fail("PREFECT_API_URL is not set: point it at the Prefect server to deploy to "
                   "(e.g. http://127.0.0.1:4200/api)")
    if apply:
        for name in apply_deployments(project_file().deployments):
            typer.echo(f"applied {name}", err=as_json)
    if list_:
        infos = list_deployments()
        if as_json:
            echo_json([i.model_dump(mode="json") for i in infos])
            return
        for i in infos:
            crons = ", ".join(f"{s.cron} {s.timezone} (next {s.next_run:%Y-%m-%d %H:%M})"
                              for s in i.schedules) or "no schedule"
            typer.echo(f"{i.name:40} {i.work_pool or '-':18} {crons}")


@app.command("rerun")
@user_errors()
def rerun(
    flow_run_id: str = typer.Argument(..., help="Id of a failed (or finished) flow run of any "
                                                "medflows flow, deployed or not."),
    stage: str = typer.Option(None, help="Re-run only this stage (e.g. score) of the run."),
) -> None:
    """Re-run a failed flow run (or one stage of it); upstream steps come from the cache."""
    from tasks_lib.ops import rerun_flow_run

    outcome = rerun_flow_run(flow_run_id, stage)
    echo_json(outcome)
    if outcome.state not in ("COMPLETED", "SCHEDULED"):
        raise typer.Exit(1)
