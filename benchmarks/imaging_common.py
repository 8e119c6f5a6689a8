"""Shared setup of the imaging benchmarks: build a pool and a classical submission in a temp dir."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tasks_lib.imaging import steps
from tasks_lib.imaging.baselines import BaselineKind, write_baseline
from tasks_lib.imaging.pool import load_task
from tasks_lib.imaging.types import PoolManifest


def pool_and_submission(task_id: str, kind: BaselineKind = BaselineKind.CLASSICAL
                        ) -> tuple[str, PoolManifest, Path]:
    """Build ``task_id``'s pool (steps called directly) and a baseline submission."""
    root = Path(tempfile.mkdtemp(prefix="medflows-bench-"))
    card = load_task(task_id)
    rendered = steps.render.fn(card)
    clean = steps.deidentify_step.fn(card, rendered)
    published = steps.publish.fn(card, str(root / "pool"), rendered, clean)
    url, manifest = published.url, published.manifest
    sub = root / "sub"
    write_baseline(kind, url, sub)
    return url, manifest, sub
