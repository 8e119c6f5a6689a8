"""MedBench v4 flows: construct the bank, rotate a subset, execute a model in API mode,
calibrate the judge (``../shared/specs/medbench.md``; scoring is the one ``score_run``)."""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from tasks_lib.artifacts import artifact_key
from tasks_lib.medbench import steps

BANK_NOTE = ("MedBench-style stand-in built from data medflows holds (MedAgentsBench questions, "
             "pydicom sample headers, the imaging tracks' generators, hand-written safety "
             "items); not MedBench data.")


@flow(name="construct-medbench", flow_run_name="construct-{pool_id}", log_prints=True)
def construct_medbench(pool_id: str = "medbench-bank", tasks: list[str] | None = None,
                       out: str | None = None, audit_override: str | None = None) -> str:
    """Build the item bank from its cards → write the version → exploit audit (publish gate)
    → ledger. Returns the pool version's root URL."""
    from tasks_lib.medbench.pool import card_ids

    ids = card_ids(tasks)
    built = steps.build_tasks(ids, len(ids))
    url, manifest = steps.publish(pool_id, out, built, [BANK_NOTE])
    steps.audit(url, audit_override)
    steps.record(url, manifest)
    lines = [f"# {pool_id} v{manifest.version}", "", f"- items: {manifest.n_items}",
             f"- content hash: `{manifest.content_hash}`", "",
             "| task | dimension | answer type | items |", "|---|---|---|---:|"]
    lines += [f"| {t} | {e.dimension.value} | {e.answer_type.value} | {e.n_items} |"
              for t, e in manifest.tasks.items()]
    create_markdown_artifact(key=artifact_key(f"pool-{pool_id}"), markdown="\n".join(lines),
                             description=f"MedBench pool {pool_id} v{manifest.version}")
    print(f"built {pool_id} v{manifest.version}: {manifest.n_items} items in "
          f"{len(manifest.tasks)} tasks")
    return url


@flow(name="rotate-medbench", flow_run_name="rotate-{subset_id}", log_prints=True)
def rotate_medbench(pool: str = "medbench-bank", size: int = 60, seed: int | None = None,
                    subset_id: str = "medbench-rotation", activate: bool = True) -> str:
    """Draw a subset of a MedBench pool (``ID`` or ``ID@vN``) stratified across tasks and
    specialties, version-locked, and make it the active one. Without a seed the seed is the
    quarter of the scheduled start (``YYYYQ``). Returns the subset version's root URL."""
    from datetime import UTC, datetime

    from prefect.runtime import flow_run

    from tasks_lib.rotation import activate_subset, quarter_seed, subset_markdown

    when = flow_run.scheduled_start_time or datetime.now(UTC)
    seed = quarter_seed(when.date()) if seed is None else seed
    subset = steps.rotate(pool, size, seed, subset_id)
    if activate:
        activate_subset(subset)
    create_markdown_artifact(key=artifact_key(f"subset-{subset_id}"),
                             markdown=subset_markdown(subset),
                             description=f"MedBench subset {subset_id} v{subset.version}")
    print(f"subset {subset_id} v{subset.version}: {subset.n_items} items, {subset.url}")
    return subset.url
