"""rotate (scheduled quarterly): stratified sample of published pools → version-locked subset.

One flow for every kind of pool: the parents' kit says what a unit is, which strata exist and
how a subset pool is written (:mod:`tasks_lib.rotation`)."""

from __future__ import annotations

from datetime import UTC, datetime

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from flows import compose
from tasks_lib.artifacts import artifact_key
from tasks_lib.rotation import SubsetManifest, activate_subset, quarter_seed, subset_markdown
from tasks_lib.rotation.subsets import draw_subset, publish_subset, resolve_parents, strata_fields
from tasks_lib.rotation.types import SubsetRequest

compose()  # every kit registered, also when a deployment loads this module


def _run_name() -> str:
    """``rotate-<subset id>``, or ``rotate-<parent pools>`` when the id is left to default."""
    params = flow_run.parameters
    return f"rotate-{params.get('subset_id') or '+'.join(params.get('pools') or [])}"


@flow(name="rotate-pool", flow_run_name=_run_name, log_prints=True)
def rotate_pool(
    pools: list[str],
    size: int = 300,
    seed: int | None = None,
    subset_id: str | None = None,
    stratify_by: list[str] | None = None,
    activate: bool = True,
    track: str | None = None,
) -> SubsetManifest:
    """Draw an evaluation subset from pools (``ID`` or ``ID@vN``, one track) and make it the
    active one.

    Strata default to the kit's (QA: dataset, meta_info; MedBench: task, specialty; RWE:
    design; imaging and challenge: one stratum); the subset id defaults to
    ``<track>-rotation``. Without a seed, the seed is the quarter of the scheduled start
    (``YYYYQ``), so each quarterly run draws a fresh subset while a re-run of the same quarter
    gives the identical one. ``track``: the parents must be of that track (an alias such as
    ``medbench rotate``). A bad subset id or parent fails before anything is written.
    """
    from tasks_lib.rotation import check_subset_id

    if subset_id is not None:
        check_subset_id(subset_id)
    when = flow_run.scheduled_start_time or datetime.now(UTC)
    seed = quarter_seed(when.date()) if seed is None else seed
    parents = resolve_parents(pools, track)
    fields = strata_fields(parents.track, stratify_by)
    drawn = draw_subset(parents, fields, size, seed)
    request = SubsetRequest(subset_id=subset_id or f"{parents.track}-rotation", seed=seed,
                            size=size, stratify_by=fields, parents=parents.pools)
    subset = publish_subset(parents, request, drawn)
    if activate:
        activate_subset(subset)
    create_markdown_artifact(key=artifact_key(f"subset-{subset.subset_id}"),
                             markdown=subset_markdown(subset),
                             description=f"Subset {subset.subset_id} v{subset.version}")
    print(f"subset {subset.subset_id} v{subset.version}: {subset.n_items} items, {subset.url}")
    return subset
