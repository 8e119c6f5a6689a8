"""construct: ``kit.build`` (ingest → de-identify → normalize → … → write pool vN, the kit's
:meth:`~tasks_lib.tracks.base.TrackKit.build`) → exploit audit → publish (ledger), the shared
tail :func:`tasks_lib.pool_publish.publish_version`. :func:`construct_pool` builds any kit's
task; the per-kit flows (``construct-qa``, ``construct-imaging`` here, ``construct-challenge``,
``construct-medbench``, ``construct-rwe``) are the same two calls with the kit's parameters."""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from flows import compose
from tasks_lib.artifacts import artifact_key
from tasks_lib.domain import SelectionRule, Track
from tasks_lib.pool_publish import publish_version
from tasks_lib.qa.summary import manifest_markdown
from tasks_lib.qa.types import PoolManifest as QAManifest
from tasks_lib.qa.types import PublishedPool
from tasks_lib.tracks.base import BuildRequest, BuiltPool, OptionValue, kit_for, task_track

compose()  # every kit registered, also when a deployment loads this module


def _run_name() -> str:
    """``construct-<pool_id>``, else ``construct-<task ids>``."""
    from prefect.runtime import flow_run

    params = flow_run.parameters
    return f"construct-{params.get('pool_id') or '+'.join(params.get('tasks') or [])}"


@flow(name="construct", flow_run_name=_run_name, log_prints=True)
def construct_pool(tasks: list[str], pool_id: str | None = None, out: str | None = None,
                   seed: int | None = None, audit_override: str | None = None,
                   options: dict[str, OptionValue] | None = None) -> BuiltPool:
    """Build the pool of ``tasks`` (task ids of one kit; their cards name it) with the kit's
    :meth:`~tasks_lib.tracks.base.TrackKit.build` (``options``: its own knobs) → exploit audit
    (an unclean one stops here unless ``audit_override`` gives a reason) → ledger. Returns the
    written version (root URL, manifest, items)."""
    kit = kit_for(task_track(tasks))
    built = kit.build(BuildRequest(tasks=tasks, pool_id=pool_id, out=out, seed=seed,
                                   options=options or {}))
    publish_version(built.url, built.manifest, audit_override, built.n_items)
    print(f"built {built.manifest.pool_id} v{built.manifest.version} ({kit.track.value}): "
          f"{built.n_items} items")
    return built


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
    """Build and publish a hard multiple-choice QA pool from dataset cards (the QA kit's
    :meth:`~tasks_lib.tracks.qa.QAKit.build`). The pool is ledgered (published) only after a
    clean exploit audit, or with ``audit_override`` (a reason)."""
    options: dict[str, OptionValue] = {
        "source": source, "predictions": predictions, "models": models,
        "select": SelectionRule(select).value, "per_dataset": per_dataset,
        "threshold": threshold, "meld": meld, "meld_models": meld_models,
        "meld_threshold": meld_threshold, "auto_approve": auto_approve,
        "review_timeout_s": review_timeout_s}
    built = kit_for(Track.QA).build(BuildRequest(tasks=datasets or [], pool_id=pool_id, out=out,
                                                 seed=seed, options=options))
    assert isinstance(built.manifest, QAManifest)
    publish_version(built.url, built.manifest, audit_override, built.n_items)
    create_markdown_artifact(key=artifact_key(f"pool-{pool_id}"),
                             markdown=manifest_markdown(built.manifest),
                             description=f"Pool {pool_id} v{built.manifest.version}")
    return PublishedPool(url=built.url, manifest=built.manifest)


@flow(name="construct-imaging", flow_run_name="construct-imaging-{task_id}", log_prints=True)
def construct_imaging(task_id: str, out: str | None = None, audit_override: str | None = None,
                      from_dir: str | None = None, track: str | None = None,
                      layout: str | None = None) -> str:
    """Build an imaging task's pool: ingest (render a shipped card's cases, or read the user's
    folder ``from_dir`` as a ``track`` task, a public release in its ``layout``, or the user's
    download of a public-release card) → validate → de-identify → write (vN) → sample
    submission (the track kit's :meth:`~tasks_lib.imaging.kit.ImagingKit.build`) → exploit
    audit → ledger (publish; an unclean audit stops here unless ``audit_override`` gives a
    reason). Both kinds of task take the same steps after ingest. Returns the URL of the pool
    version's ``manifest.json``."""
    from tasks_lib.imaging.pool import load_task
    from tasks_lib.imaging.registry import imaging_kit
    from tasks_lib.imaging.types import PoolManifest

    kit = imaging_kit(Track(track) if from_dir and track else load_task(task_id).track)
    options = {k: v for k, v in (("from_dir", from_dir), ("layout", layout)) if v is not None}
    built = kit.build(BuildRequest(tasks=[task_id], out=out, options=options))
    m = built.manifest
    assert isinstance(m, PoolManifest)
    publish_version(built.url, m, audit_override, built.n_items)
    print(f"built {task_id} v{m.version}: {len(m.cases)} cases, header fields cleared "
          f"{m.deid.fields_cleared or 'none'}")
    return f"{built.url.rstrip('/')}/manifest.json"
