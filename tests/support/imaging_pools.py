"""Build pools and score submissions with the kits, without the Prefect server."""

from __future__ import annotations

from pathlib import Path

from support.audited import record_override
from tasks_lib.imaging import steps
from tasks_lib.imaging.pool import load_task
from tasks_lib.imaging.registry import imaging_kit
from tasks_lib.imaging.types import PoolManifest
from tasks_lib.pool_publish import record_version
from tasks_lib.records import ScoreCard

TASKS = ["brain-tissue-seg", "ldct-denoise", "mri-superres", "brain-lesion-det",
         "brain-lesion-vqa", "brain-lesion-report"]


def build_pool(task_id: str, root: Path) -> tuple[str, PoolManifest]:
    """Build a pool as the construct flow does (without its exploit audit: tests/tasks_lib/
    test_audit.py audits every kind of pool), without the Prefect server."""
    card = load_task(task_id)
    rendered = steps.render.fn(card)
    clean = steps.deidentify_step.fn(card, rendered)
    published = steps.publish.fn(card, str(root / task_id), rendered, clean)
    steps.sample_submission.fn(published.url, published.manifest)
    record_override(published.url)
    record_version.fn(published.url, published.manifest, len(published.manifest.cases))
    return published.url, published.manifest


def score(task_id: str, pool_url: str, submission: Path, use_dask: bool = False) -> ScoreCard:
    """The kit's scoring of a submission folder, without the Prefect server."""
    card = load_task(task_id)
    return imaging_kit(card.track).score_folder(card, pool_url, submission, use_dask=use_dask)
