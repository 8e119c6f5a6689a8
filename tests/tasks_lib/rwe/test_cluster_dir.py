"""Where medflows' own RWE cluster lives by default: the postgres OS user must reach it."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

import tasks_lib.settings as settings


@pytest.mark.skipif(os.geteuid() != 0, reason="the folder only moves for root (postgres runs "
                                               "as its own OS user then)")
def test_a_checkout_in_a_closed_folder_gets_a_reachable_cluster_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = tmp_path / "closed"
    (closed / "project").mkdir(parents=True)
    os.chmod(closed, 0o700)
    monkeypatch.setattr(settings, "PROJECT_ROOT", closed / "project")
    moved = settings._rwe_cluster_dir()
    assert moved != closed / "project" / ".medflows" / "rwe-cluster"
    assert all(os.stat(p).st_mode & 0o001 for p in moved.parents)  # others may traverse
    assert moved == settings._rwe_cluster_dir()  # the same project always gets the same folder

    opened = Path(tempfile.mkdtemp(prefix="medflows-open-"))  # /tmp itself is open to all
    try:
        os.chmod(opened, 0o755)
        monkeypatch.setattr(settings, "PROJECT_ROOT", opened / "project")
        assert settings._rwe_cluster_dir() == opened / "project" / ".medflows" / "rwe-cluster"
    finally:
        shutil.rmtree(opened)
