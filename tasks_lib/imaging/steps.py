"""Prefect steps of the imaging construct and score DAGs (each does one thing)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
from prefect import task

from expectations import validate_frame
from tasks_lib.caching import IO_RETRIES, cached
from tasks_lib.domain import Track
from tasks_lib.imaging import render as render_mod
from tasks_lib.imaging.baselines import BaselineKind, baseline_files
from tasks_lib.imaging.deid import Deidentified, deidentify
from tasks_lib.imaging.pool import read_manifest, write_pool
from tasks_lib.imaging.scoring import (
    CASE_METRICS,
    CASE_SCORERS,
    card_markdown,
    extra_task_metrics,
    per_case_rows,
    score_card,
)
from tasks_lib.imaging.types import (
    CaseScore,
    FrameRow,
    PoolManifest,
    ScoreCard,
    ValidationFailure,
    ValidationReport,
)
from tasks_lib.storage import Storage
from tasks_lib.taskspec import TaskSpec


@task(task_run_name="render-{card.task_id}", **cached())
def render(card: TaskSpec) -> render_mod.Rendered:
    """Generate the task's cases and render public inputs and private references (ingest)."""
    return render_mod.RENDERERS.get(card.track.value)(card)


@task(task_run_name="deidentify-{card.task_id}")
def deidentify_step(card: TaskSpec, rendered: render_mod.Rendered) -> Deidentified:
    """Blank identifying header text of every volume before anything is published."""
    return deidentify(rendered.artifacts)


@task(task_run_name="publish-{card.task_id}", **IO_RETRIES)
def publish(card: TaskSpec, pool_url: str, rendered: render_mod.Rendered,
            clean: Deidentified) -> PoolManifest:
    """Write public view, private references and the manifest."""
    return write_pool(pool_url, card, clean.artifacts, rendered.cases, rendered.labels,
                      rendered.classes, clean.record)


@task(task_run_name="sample-submission-{manifest.task_id}", **IO_RETRIES)
def sample_submission(pool_url: str, manifest: PoolManifest) -> str:
    """Write the ``constant`` baseline as ``public/sample_submission/`` (a valid layout)."""
    store = Storage(pool_url)
    for name, data in baseline_files(BaselineKind.CONSTANT, pool_url, manifest):
        store.write_bytes(f"public/sample_submission/{name}", data)
    return store.url("public/sample_submission")


@task(task_run_name="read-manifest")
def load_manifest(pool_url: str) -> PoolManifest:
    """The manifest of a built pool."""
    return read_manifest(pool_url)


@task(task_run_name="inspect-submission-{manifest.task_id}")
def inspect(submission: str, manifest: PoolManifest) -> list[FrameRow]:
    """The submission's manifest frame (never raises on a bad submission)."""
    from tasks_lib.imaging.submission import inspect_submission

    return inspect_submission(Path(submission), manifest)


@task(task_run_name="validate-{track}")
def validate(track: str, rows: list[FrameRow]) -> ValidationReport:
    """Run the track's Great Expectations suite on the frame."""
    frame = pd.DataFrame([{**r.model_dump(), "valid": r.valid} for r in rows])
    out = validate_frame(track, frame)
    return ValidationReport(ok=out.ok, suite=out.suite, failures=[
        ValidationFailure(**f.model_dump()) for f in out.failures])


def submission_digest(submission: str, rows: list[FrameRow]) -> str:
    """Content digest of the valid files (cache key of metric steps)."""
    h = hashlib.sha256()
    root = Path(submission)
    for r in rows:
        h.update(f"{r.case_id}:{r.valid}".encode())
    for p in sorted(root.iterdir()) if root.is_dir() else []:
        if p.is_file() and not p.is_symlink():
            h.update(p.name.encode() + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


@task(task_run_name="case-metrics-{manifest.task_id}")
def case_metrics(card: TaskSpec, submission: str, pool_url: str, manifest: PoolManifest,
                 rows: list[FrameRow], use_dask: bool) -> list[CaseScore]:
    """Metric values of every expected case (invalid → each metric's missing value)."""
    valid = [r.case_id for r in rows if r.valid]
    if use_dask and card.track == Track.SEGMENTATION:
        from tasks_lib.imaging.sharding import score_segmentation_dask

        values = score_segmentation_dask(Path(submission), pool_url, manifest, valid)
    else:
        values = CASE_SCORERS.get(card.track.value)(Path(submission), Storage(pool_url),
                                                    manifest, valid)
    return per_case_rows(manifest, rows, values, CASE_METRICS[card.track.value])


@task(task_run_name="task-metrics-{manifest.task_id}")
def dataset_metrics(submission: str, pool_url: str, manifest: PoolManifest,
                    rows: list[FrameRow]) -> dict[str, float]:
    """Dataset-level metrics (detection mAP, micro finding P/R/F1)."""
    valid = [r.case_id for r in rows if r.valid]
    return extra_task_metrics(Path(submission), Storage(pool_url), manifest, valid)


@task(task_run_name="score-card-{card.task_id}")
def assemble(card: TaskSpec, manifest: PoolManifest, rows: list[FrameRow],
             per_case: list[CaseScore], extra: dict[str, float],
             validation: ValidationReport) -> ScoreCard:
    """Apply policy and compute S4/S5."""
    return score_card(card, manifest, rows, per_case, extra, validation)


@task(task_run_name="score-artifact-{sc.task_id}")
def publish_artifact(sc: ScoreCard) -> None:
    """The score card summary as a Prefect markdown artifact (validation readable in the UI)."""
    from prefect.artifacts import create_markdown_artifact

    from tasks_lib.artifacts import artifact_key

    create_markdown_artifact(key=artifact_key(f"score-{sc.task_id}"), markdown=card_markdown(sc),
                             description=f"Score card of {sc.task_id}")


@task(task_run_name="ledger-score-{run_id}", **IO_RETRIES)
def record_score(sc: ScoreCard, run_id: str, card_url: str) -> bool:
    """Append the card's summary to the ledger (append-only per ``(run_id, evaluator_version)``;
    the run row must exist). Returns False when that key was already scored."""
    from tasks_lib.ledger import store
    from tasks_lib.ledger.tables import ScoreRow

    return store.append_score(ScoreRow(
        run_id=run_id, evaluator_version=sc.evaluator_version, task_score=sc.task_score,
        metrics_json=store.dumps(sc.metrics), stages_json=store.dumps({"s4": sc.s4, "s5": sc.s5}),
        card_url=card_url))


@task(task_run_name="store-score-card-{sc.task_id}", **IO_RETRIES)
def store_card(sc: ScoreCard, submission: str, rows: list[FrameRow]) -> str:
    """Persist the score card (with its validation result) under the storage root, named by the
    submission's content digest."""
    digest = submission_digest(submission, rows)
    store = Storage.from_settings()
    return store.write_json(f"scores/imaging/{sc.task_id}/{digest[:16]}-{sc.evaluator_version}"
                            ".json", sc)
