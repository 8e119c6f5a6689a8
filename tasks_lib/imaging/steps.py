"""Prefect steps of the imaging construct DAG (each does one thing); scoring is the one score
flow's (:mod:`tasks_lib.scoring`)."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from pydantic import Field

from tasks_lib.caching import IO_RETRIES, cached
from tasks_lib.domain import Frozen
from tasks_lib.imaging import render as render_mod
from tasks_lib.imaging.baselines import BaselineKind, baseline_files
from tasks_lib.imaging.checks import check_rendered
from tasks_lib.imaging.dataset import save_user_card
from tasks_lib.imaging.deid import Deidentified, deidentify
from tasks_lib.imaging.pool import write_pool
from tasks_lib.imaging.registry import imaging_kit
from tasks_lib.imaging.types import PoolManifest
from tasks_lib.sources import ImageFolderSource
from tasks_lib.storage import Storage
from tasks_lib.taskspec import TaskSpec


class PublishedImagingPool(Frozen):
    """An imaging pool version and where it lives."""

    url: str = Field(description="Root URL of the pool version (holds manifest.json).")
    manifest: PoolManifest = Field(description="Its manifest.")


@task(task_run_name="render-{card.task_id}", **cached(modules=(
    "tasks_lib.imaging.render", "tasks_lib.imaging.synth", "tasks_lib.imaging.lesions",
    "tasks_lib.imaging.reports", "tasks_lib.imaging.vqa_items", "tasks_lib.imaging.codecs",
    "tasks_lib.imaging.types", "tasks_lib.imaging.kit")))
def render(card: TaskSpec) -> render_mod.Rendered:
    """Generate the task's cases and render public inputs and private references (ingest)."""
    return imaging_kit(card.track).build_files(card)


@task(task_run_name="ingest-{card.task_id}")
def ingest(card: TaskSpec, folder: str) -> render_mod.Rendered:
    """Read a user's folder of images and labels, or a public release in its layout, into pool
    files (ingest; DICOM slices are de-identified as they are read)."""
    from tasks_lib.imaging.intake import ingest_card

    return ingest_card(card, Path(folder))


@task(task_run_name="validate-{card.task_id}")
def validate(card: TaskSpec, rendered: render_mod.Rendered) -> None:
    """Hold the files to the track's rules (grids, spacings, label sets, boxes), generated or
    ingested alike; a broken rule names the file and stops the build before anything is
    written."""
    check_rendered(card.track, rendered)


@task(task_run_name="deidentify-{card.task_id}")
def deidentify_step(card: TaskSpec, rendered: render_mod.Rendered) -> Deidentified:
    """Blank identifying header text of every volume before anything is published (what ingest
    already removed from DICOM slices is added to the record)."""
    return deidentify(rendered.artifacts, rendered.deid)


@task(task_run_name="publish-{card.task_id}", **IO_RETRIES)
def publish(card: TaskSpec, out: str | None, rendered: render_mod.Rendered,
            clean: Deidentified) -> PublishedImagingPool:
    """Write public view, private references and the manifest as the next version (or the
    version with identical content), at ``out`` or ``pools/<task_id>/vN`` (the shared tail,
    :func:`tasks_lib.pool_publish.publish_version`, ledgers it once its exploit audit passed)."""
    url, manifest = write_pool(card, clean.artifacts, rendered.cases, rendered.labels,
                               rendered.classes, clean.record, out)
    imaging_kit(card.track).after_publish(url, manifest)
    if isinstance(card.source, ImageFolderSource):
        save_user_card(card)
    return PublishedImagingPool(url=url, manifest=manifest)


@task(task_run_name="sample-submission-{manifest.task_id}", **IO_RETRIES)
def sample_submission(pool_url: str, manifest: PoolManifest) -> str:
    """Write the ``constant`` baseline as ``public/sample_submission/`` (a valid layout)."""
    store = Storage(pool_url)
    for name, data in baseline_files(BaselineKind.CONSTANT, pool_url, manifest):
        store.write_bytes(f"public/sample_submission/{name}", data)
    return store.url("public/sample_submission")
