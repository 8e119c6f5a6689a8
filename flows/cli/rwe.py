"""``medflows pool build rwe``: generate the synthetic EHR (or take the user's MIMIC-IV tables or
database), load it, publish the RWE studies."""

from __future__ import annotations

import os

import typer

from evaluators.vocabulary import InputDataError, Track
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
    from_tables: str = typer.Option(
        None, "--from-tables", help="Folder of MIMIC-IV-layout files (hosp/*.csv.gz, "
        "icu/*.csv.gz, derived/*; .csv, .csv.gz or .parquet), checked against mimic-code's "
        "DDL and loaded instead of the generated EHR."),
    from_db: str = typer.Option(
        None, "--from-db", help="URL of a MIMIC-IV database built with mimic-code, on the study "
        "server: the studies run on it in place (nothing copied out)."),
    build_concepts: bool = typer.Option(
        False, "--build-concepts", help="With --from-db: build the missing derived concepts "
        "mimic-code's SQL makes from the base tables (age, icustay_detail, first_day_lab) in "
        "that database's mimiciv_derived."),
    pool_id: str = typer.Option(None, help="Pool name (default rwe-synthetic; rwe-tables, "
                                "rwe-mimic with --from-tables, --from-db)."),
    out: str = typer.Option(None, help="Pool version folder/URL (default in the storage root)."),
    audit_override: str = typer.Option(
        None, help="Publish even if the RWE exploit audit is not clean; the reason is recorded "
        "in the pool's audit.json."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Generate + load the synthetic EHR (or check and use the user's MIMIC-IV tables or
    database) and publish the RWE study pool (construct DAG)."""
    from flows.rwe import construct_rwe
    from tasks_lib.rwe.construct_steps import resolve_database
    from tasks_lib.settings import reset_settings

    ids = split_list(studies)
    _check_sources(ids, from_tables, from_db, build_concepts)
    if database_url:  # checked here; the flow reads it from the settings (never a parameter)
        resolve_database(database_url)
        os.environ["MEDFLOWS_RWE_DB_URL"] = database_url
        reset_settings()
    server = resolve_database(None)  # an unusable study server: one error line before the flow
    name = _database_name(from_db, server) if from_db else None
    default_id = "rwe-mimic" if from_db else "rwe-tables" if from_tables else "rwe-synthetic"
    published = construct_rwe(seed=seed, n_patients=n_patients, studies=ids,
                              pool_id=pool_id or default_id, out=location(out) if out else None,
                              audit_override=audit_override,
                              from_tables=location(from_tables) if from_tables else None,
                              from_db=name, build_concepts=build_concepts)
    m = published.manifest
    summary = {"pool_id": m.pool_id, "version": m.version, "content_hash": m.content_hash,
               "source": m.source.value, "ehr_hash": m.ehr_hash, "seed": m.seed,
               "n_patients": m.n_patients, "database": m.database,
               "database_reused": published.database_reused,
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


def _check_sources(ids: list[str] | None, from_tables: str | None, from_db: str | None,
                   build_concepts: bool) -> list[str]:
    """The cards' analyses, after checking the user's files (every value: nothing is written on
    bad input) or database layout; one error line otherwise."""
    from tasks_lib.rwe.studies import load_studies

    analyses = [s.analysis for s in load_studies(ids)]
    if from_db and from_tables:
        raise InputDataError("--from-db", "give --from-db or --from-tables, not both")
    if from_tables:
        from pathlib import Path

        from tasks_lib.rwe.source_tables import table_csvs

        table_csvs(Path(from_tables), analyses)
    if from_db:
        from tasks_lib.rwe.source_db import check_database

        check_database(from_db, analyses, build_concepts)
    return analyses


def _database_name(url: str, server: str) -> str:
    """The ``--from-db`` database's name, checked to be on the study server (the flow gets the
    name: no credential in its parameters)."""
    from tasks_lib.rwe.source_db import check_mark, check_on_study_server, database_of

    check_on_study_server(url, server)
    check_mark(server, database_of(url))
    return database_of(url)
