"""Operations commands: ``pool rotate``, ``deploy``, ``rerun``."""

from __future__ import annotations

import json

import typer

from flows.cli.groups import fail, pool_app, split_list
from tasks_lib.errors import InputDataError


@pool_app.command("rotate")
def pool_rotate(
    pools: str = typer.Option(..., help="Comma-separated parent pools: ID (newest) or ID@vN."),
    size: int = typer.Option(..., min=0, help="Items in the subset (small strata stay whole)."),
    seed: int = typer.Option(None, help="Sampling seed (default: quarter of today, YYYYQ)."),
    subset_id: str = typer.Option("qa-rotation", help="Subset name (runs and scores name it)."),
    stratify_by: str = typer.Option("dataset,meta_info", help="Stratum fields, comma-separated."),
    activate: bool = typer.Option(True, help="Make the subset the active one."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole subset manifest."),
) -> None:
    """Draw a version-locked, stratified evaluation subset (rotate flow)."""
    from flows.rotate import rotate_pool
    from tasks_lib.rotation import StratumField

    try:
        fields = [StratumField(f) for f in split_list(stratify_by) or []]
        subset = rotate_pool(pools=split_list(pools) or [], size=size, seed=seed,
                             subset_id=subset_id, stratify_by=fields, activate=activate)
    except (InputDataError, ValueError) as exc:
        raise fail(str(exc)) from None
    if as_json:
        typer.echo(subset.model_dump_json(indent=2))
        return
    typer.echo(json.dumps({"subset_id": subset.subset_id, "version": subset.version,
                           "content_hash": subset.content_hash, "n_items": subset.n_items,
                           "url": subset.url}, indent=2))
