"""construct: ingest → de-identify → normalize → difficulty-filter → MELD screen → expert review
→ write pool (vN) → exploit audit → publish (ledger); the tail is the shared
:func:`tasks_lib.pool_publish.publish_version`."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, pause_flow_run
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from tasks_lib.artifacts import artifact_key
from tasks_lib.domain import SelectionRule, Track
from tasks_lib.pool_publish import publish_version
from tasks_lib.qa import steps
from tasks_lib.qa.ingest import default_source, qa_datasets
from tasks_lib.qa.review import ReviewInput, auto_record, to_record
from tasks_lib.qa.summary import manifest_markdown
from tasks_lib.qa.types import MeldRecord, PublishedPool, ReviewRecord

REVIEW_POLL_S = 2


def build_dataset(dataset: str, source: str, predictions: str, predictions_digest: str,
                  models: list[str] | None, select: SelectionRule, per_dataset: int,
                  threshold: float, seed: int) -> steps.DatasetBuild:
    """The per-dataset part of construct, step by step."""
    src = steps.resolve_card(dataset, source)
    ingested = steps.ingest(dataset, src.questions, src.questions_digest)
    scrubbed = steps.deidentify(dataset, ingested.items)
    normalized = steps.normalize(dataset, scrubbed.items, src.questions)
    difficulty = steps.difficulty_filter(
        dataset, normalized.items, predictions, predictions_digest, models, select, per_dataset,
        threshold, seed, src.stratify_field)
    chosen = {d.realidx for d in difficulty if d.selected}
    order = [d.realidx for d in difficulty if d.selected]
    by_id = {it.realidx: it for it in normalized.items if it.realidx in chosen}
    selected = [by_id[r] for r in order]
    exemplars = steps.select_exemplars(dataset, src.train, ingested.items,
                                       {it.key for it in selected})
    return steps.DatasetBuild(dataset, ingested.n_lines, selected,
                              ingested.rejects + normalized.rejects, difficulty, scrubbed.records,
                              exemplars)


def expert_review(flagged: list[str], auto_approve: bool, timeout_s: int) -> ReviewRecord:
    """Pause for a reviewer (Prefect UI or ``medflows review``) unless auto-approving."""
    if auto_approve:
        return auto_record(flagged)
    get_run_logger().warning(
        "Pool awaiting expert review (%d flagged items). Resume from the Prefect UI or run: "
        "medflows review %s --reviewer NAME [--reject] [--item KEY=approve|reject]",
        len(flagged), flow_run.get_id())
    form = ReviewInput.with_initial_data(
        description="Flagged (likely memorised) items: " + (", ".join(flagged) or "none"))
    answer = pause_flow_run(wait_for_input=form, timeout=timeout_s, poll_interval=REVIEW_POLL_S)
    return to_record(answer, flagged)


@flow(name="construct-qa", flow_run_name="construct-{pool_id}", log_prints=True)
def construct_qa(
    pool_id: str = "medagentsbench-hard",
    datasets: list[str] | None = None,
    source: str | None = None,
    predictions: str | None = None,
    models: list[str] | None = None,
    select: SelectionRule = SelectionRule.FIRST,
    per_dataset: int = 100,
    threshold: float = 0.5,
    seed: int = 0,
    meld: bool = True,
    meld_models: list[str] | None = None,
    meld_threshold: float = 0.95,
    auto_approve: bool = False,
    review_timeout_s: int = 7 * 24 * 3600,
    out: str | None = None,
    audit_override: str | None = None,
) -> PublishedPool:
    """Build and publish a hard multiple-choice QA pool from dataset cards. The pool is ledgered
    (published) only after a clean exploit audit, or with ``audit_override`` (a reason)."""
    source = source or default_source()
    predictions = predictions or f"{source}/predictions/full.csv.gz"
    digest = steps.file_digest(predictions)
    builds = [build_dataset(ds, source, predictions, digest, models, select, per_dataset,
                            threshold, seed) for ds in datasets or qa_datasets()]
    records: list[MeldRecord] = []
    if meld:
        for b in builds:
            records += steps.meld_screen(b.dataset, b.selected, meld_models or ["gpt-4o-mini"],
                                         meld_threshold)
    flagged = sorted({r.key for r in records if r.flagged})
    review = expert_review(flagged, auto_approve, review_timeout_s)
    selection = {"rule": select.value, "per_dataset": per_dataset, "threshold": threshold,
                 "seed": seed, "predictions": predictions, "models": models,
                 "meld_models": (meld_models or ["gpt-4o-mini"]) if meld else None,
                 "meld_threshold": meld_threshold}
    published = steps.publish_pool(pool_id, out, builds, records, review, selection)
    publish_version(published.url, published.manifest, audit_override,
                    steps.n_items(published.manifest))
    create_markdown_artifact(key=artifact_key(f"pool-{pool_id}"),
                             markdown=manifest_markdown(published.manifest),
                             description=f"Pool {pool_id} v{published.manifest.version}")
    return published


@flow(name="construct-imaging", flow_run_name="construct-imaging-{task_id}", log_prints=True)
def construct_imaging(task_id: str, out: str | None = None, audit_override: str | None = None,
                      from_dir: str | None = None, track: str | None = None) -> str:
    """Build an imaging task's pool: ingest (render a shipped card's cases, or read the user's
    folder ``from_dir`` as a ``track`` task) → validate → de-identify → write (vN) → sample
    submission → exploit audit → ledger (publish; an unclean audit stops here unless
    ``audit_override`` gives a reason). Both kinds of task take the same steps after ingest.
    Returns the URL of the pool version's ``manifest.json``."""
    from tasks_lib.imaging import steps as imaging
    from tasks_lib.imaging.dataset import folder_card
    from tasks_lib.imaging.pool import load_task

    if from_dir is None:
        card = load_task(task_id)
        rendered = imaging.render(card)
    else:
        card = folder_card(Path(from_dir), Track(track or ""), task_id)
        rendered = imaging.ingest(card, from_dir)
    imaging.validate(card, rendered)
    clean = imaging.deidentify_step(card, rendered)
    published = imaging.publish(card, out, rendered, clean)
    imaging.sample_submission(published.url, published.manifest)
    publish_version(published.url, published.manifest, audit_override,
                    len(published.manifest.cases))
    print(f"built {task_id} v{published.manifest.version}: {len(published.manifest.cases)} "
          f"cases, header fields cleared {published.manifest.deid.fields_cleared or 'none'}")
    return f"{published.url.rstrip('/')}/manifest.json"
