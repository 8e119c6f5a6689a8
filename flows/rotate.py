"""rotate (scheduled quarterly): stratified sample of active pools → version-locked subset."""

from __future__ import annotations

from datetime import UTC, datetime

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from tasks_lib.artifacts import artifact_key
from tasks_lib.rotation import (
    StratumField,
    SubsetManifest,
    activate_subset,
    draw_subset,
    publish_subset,
    quarter_seed,
    resolve_parents,
    subset_markdown,
)

DEFAULT_STRATA = [StratumField.DATASET, StratumField.META_INFO]


@flow(name="rotate-pool", flow_run_name="rotate-{subset_id}", log_prints=True)
def rotate_pool(
    pools: list[str],
    size: int = 300,
    seed: int | None = None,
    subset_id: str = "qa-rotation",
    stratify_by: list[StratumField] | None = None,
    activate: bool = True,
) -> SubsetManifest:
    """Draw an evaluation subset from pools (``ID`` or ``ID@vN``) and make it the active one.

    Strata default to (dataset, meta_info).

    Without a seed, the seed is the quarter of the scheduled start (``YYYYQ``), so each quarterly
    run draws a fresh subset while a re-run of the same quarter gives the identical one.
    """
    when = flow_run.scheduled_start_time or datetime.now(UTC)
    seed = quarter_seed(when.date()) if seed is None else seed
    stratify_by = stratify_by or DEFAULT_STRATA
    parents = resolve_parents(pools)
    drawn = draw_subset(parents, size, seed, stratify_by)
    subset = publish_subset(subset_id, drawn, parents, size, seed, stratify_by)
    if activate:
        activate_subset(subset)
    create_markdown_artifact(key=artifact_key(f"subset-{subset_id}"),
                             markdown=subset_markdown(subset),
                             description=f"Subset {subset_id} v{subset.version}")
    print(f"subset {subset_id} v{subset.version}: {subset.n_items} items, {subset.url}")
    return subset
