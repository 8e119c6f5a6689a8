"""Build pools and score submissions with the flows' steps, without the Prefect server."""

from __future__ import annotations

from pathlib import Path

from tasks_lib.imaging import steps
from tasks_lib.imaging.pool import load_task
from tasks_lib.imaging.sharding import stage_references
from tasks_lib.imaging.types import PoolManifest, ScoreCard

TASKS = ["brain-tissue-seg", "ldct-denoise", "mri-superres", "brain-lesion-det",
         "brain-lesion-vqa", "brain-lesion-report"]


def build_pool(task_id: str, root: Path) -> tuple[str, PoolManifest]:
    """Build a pool exactly as the construct flow does, without the Prefect server."""
    card = load_task(task_id)
    url = str(root / task_id)
    rendered = steps.render.fn(card)
    clean = steps.deidentify_step.fn(card, rendered)
    manifest = steps.publish.fn(card, url, rendered, clean)
    if card.track.value == "segmentation":
        stage_references(url, manifest)
    steps.sample_submission.fn(url, manifest)
    return url, manifest


def score(task_id: str, pool_url: str, submission: Path, use_dask: bool = False) -> ScoreCard:
    """The score flow's steps in order, without the Prefect server."""
    card = load_task(task_id)
    m = steps.load_manifest.fn(pool_url)
    rows = steps.inspect.fn(str(submission), m)
    val = steps.validate.fn(card.track.value, rows)
    per_case = steps.case_metrics.fn(card, str(submission), pool_url, m, rows, use_dask)
    extra = steps.dataset_metrics.fn(str(submission), pool_url, m, rows)
    return steps.assemble.fn(card, m, rows, per_case, extra, val)
