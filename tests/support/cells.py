"""Research-cell helpers for tests: a file task's environment with a short time budget."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tasks_lib.harness.environment import Environment
from tasks_lib.tracks.base import find_card


def file_env(task_id: str, pool: Path, time_budget_s: int) -> Environment:
    """The environment of ``task_id``'s card on ``pool``, its time budget ``time_budget_s``."""
    card = find_card(task_id).model_copy(update={"time_budget_s": time_budget_s})
    return Environment(card, pool)


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bwrap sandbox not installed")
"""Skip a test that runs the bubblewrap sandbox where it is not installed."""
