"""``medflows pool build medbench``, ``medflows pool rotate-medbench``, ``medflows execute
medbench``, ``medflows report medbench``, ``medflows medbench calibrate`` / ``export-ratings``:
the MedBench v4 item bank, API mode and the judge's human calibration (commands register on the
groups of :mod:`flows.cli.groups`; docs/medbench.md)."""

from __future__ import annotations

import typer

from flows.cli.groups import build_app, location, medbench_app, split_list, user_errors
from flows.cli.output import echo_json


@build_app.command("medbench")
@user_errors()
def build_medbench(
    out: str = typer.Option(None, help="Pool root folder/URL (default: pools/<pool-id>/vN in "
                                       "the storage root)."),
    pool_id: str = typer.Option("medbench-bank", help="Pool name."),
    tasks: str = typer.Option(None, help="Comma-separated MedBench task ids (default: every "
                                         "card under datasets/medbench/)."),
    audit_override: str = typer.Option(
        None, help="Publish even if the exploit audit is not clean; the reason is recorded in "
        "the pool's audit.json."),
    as_json: bool = typer.Option(False, "--json", help="Print the full summary (tasks with "
                                                       "dimension, specialty, answer type)."),
) -> None:
    """Build the MedBench-style item bank (construct DAG: build → write → exploit audit →
    ledger) from the cards under datasets/medbench/; prints JSON."""
    from flows.medbench import construct_medbench
    from tasks_lib.medbench.items import read_manifest
    from tasks_lib.medbench.pool import card_ids

    ids = card_ids(split_list(tasks))
    url = construct_medbench(pool_id, ids, location(out) if out else None, audit_override)
    m = read_manifest(url)
    summary: dict[str, object] = {"pool_id": m.pool_id, "version": m.version, "url": url,
                                  "n_items": m.n_items, "n_tasks": len(m.tasks),
                                  "content_hash": m.content_hash}
    if as_json:
        summary["tasks"] = {t: e.model_dump(mode="json") for t, e in m.tasks.items()}
        summary["dimensions"] = sorted({e.dimension.value for e in m.tasks.values()})
    echo_json(summary)


@medbench_app.command("rotate")
@user_errors()
def rotate_medbench_cmd(
    pool: str = typer.Option("medbench-bank", help="Parent MedBench pool: ID (newest) or "
                                                   "ID@vN."),
    size: int = typer.Option(60, min=0, help="Base questions in the subset (shuffles of a "
                                             "question come with it; small strata stay whole)."),
    seed: int = typer.Option(None, help="Sampling seed (default: quarter of today, YYYYQ)."),
    subset_id: str = typer.Option("medbench-rotation", help="Subset name (runs and scores name "
                                                            "it; use active:<name>)."),
    activate: bool = typer.Option(True, help="Make the subset the active one."),
) -> None:
    """Draw a version-locked subset of a MedBench pool stratified across tasks and specialties
    (the rotation machinery of `medflows pool rotate`); prints JSON."""
    from flows.medbench import rotate_medbench
    from tasks_lib.medbench.items import read_manifest
    from tasks_lib.rotation import SUBSET_FILE, SubsetManifest
    from tasks_lib.storage import Storage

    url = rotate_medbench(pool, size, seed, subset_id, activate)
    subset = SubsetManifest.model_validate(Storage(url).read_json(SUBSET_FILE))
    m = read_manifest(url)
    echo_json({"subset_id": subset.subset_id, "version": subset.version, "seed": subset.seed,
               "content_hash": subset.content_hash, "n_items": subset.n_items, "url": url,
               "parents": [f"{p.pool_id}@v{p.version}" for p in subset.parents],
               "strata": subset.strata,
               "tasks": {t: e.n_items for t, e in m.tasks.items()}})
