"""Imaging pools built once per session (step functions called directly, no Prefect server)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from support.imaging_pools import TASKS, build_pool

from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission
from tasks_lib.imaging.types import PoolManifest


@pytest.fixture(scope="session")
def pools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, PoolManifest]]:
    """Every imaging task's pool, built once."""
    root = tmp_path_factory.mktemp("imaging-pools")
    return {t: build_pool(t, root) for t in TASKS}


@pytest.fixture
def baseline(pools: dict[str, tuple[str, PoolManifest]],
             tmp_path: Path) -> Callable[[str, BaselineKind], Path]:
    """Write a baseline submission of a task into a fresh folder."""

    def make(task_id: str, kind: BaselineKind) -> Path:
        url, m = pools[task_id]
        out = tmp_path / f"{task_id}-{kind.value}"
        if out.exists():
            shutil.rmtree(out)
        return write_submission(baseline_files(kind, url, m), out)

    return make
