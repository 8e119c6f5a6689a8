"""``medflows pool build rwe``: generate the synthetic EHR, load it, publish the RWE studies."""

from __future__ import annotations

import os

import typer

from evaluators.vocabulary import Track
from flows.cli.groups import build_app, location, split_list, user_errors
from flows.cli.output import json_text
from flows.cli.routing import BUILD_ROUTES, EXECUTE_ROUTES, Route

BUILD_ROUTES.add("rwe", Route(("pool", "build", "rwe"), lambda: [Track.RWE.value], "--studies",
                              many=True))
EXECUTE_ROUTES.add("rwe", Route(("execute", "cells"), lambda: [Track.RWE.value]))


@build_app.command("rwe")
@user_errors()
def build_rwe(
    seed: int = typer.Option(0, help="Generator seed (same seed and size => same EHR hash)."),
    n_patients: int = typer.Option(20_000, min=8_000, help="Patients generated."),
    studies: str = typer.Option(None, help="Comma-separated study ids (default all cards)."),
    database_url: str = typer.Option(
        None, help="Admin URL of the study server; the EHR goes into its own database "
        "rwe_<ehr hash> there (default: MEDFLOWS_RWE_DB_URL, else medflows' own cluster)."),
    pool_id: str = typer.Option("rwe-synthetic", help="Pool name."),
    out: str = typer.Option(None, help="Pool version folder/URL (default in the storage root)."),
    audit_override: str = typer.Option(
        None, help="Publish even if the RWE exploit audit is not clean; the reason is recorded "
        "in the pool's audit.json."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Generate + load the synthetic EHR and publish the RWE study pool (construct DAG)."""
    from flows.rwe import construct_rwe
    from tasks_lib.rwe.construct_steps import resolve_database
    from tasks_lib.rwe.studies import load_studies
    from tasks_lib.settings import reset_settings

    ids = split_list(studies)
    load_studies(ids)
    if database_url:  # checked here; the flow reads it from the settings (never a parameter)
        resolve_database(database_url)
        os.environ["MEDFLOWS_RWE_DB_URL"] = database_url
        reset_settings()
    resolve_database(None)  # an unusable study server is one error line before the flow starts
    published = construct_rwe(seed=seed, n_patients=n_patients, studies=ids, pool_id=pool_id,
                              out=location(out) if out else None, audit_override=audit_override)
    m = published.manifest
    summary = {"pool_id": m.pool_id, "version": m.version, "content_hash": m.content_hash,
               "ehr_hash": m.ehr_hash, "seed": m.seed, "n_patients": m.n_patients,
               "database": m.database, "database_reused": published.database_reused,
               "studies": m.studies, "requested_seed": m.requested_seed,
               "rejected_seeds": [r.seed for r in m.rejected_seeds],
               "manifest": f"{published.url.rstrip('/')}/manifest.json",
               "seconds": {"generate": round(published.generate_s, 2),
                           "load": round(published.load_s, 2),
                           "analyses": round(published.analyse_s, 2)}}
    if as_json:
        typer.echo(json_text(summary, indent=2))
    else:
        typer.echo(f"{m.pool_id} v{m.version} {m.content_hash} studies: {', '.join(m.studies)}")
