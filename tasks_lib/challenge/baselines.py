"""The challenge kit's baseline submissions: no submission, ``empty`` (the answers' layout with
uninformative values: :mod:`tasks_lib.challenge.format_example`), the pool's public sample
submission, and ``perfect`` (the private answers written as a submission). The audit bounds
their leaderboard percentile (``datasets/audit/floors.yaml``, ``challenge``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tasks_lib.audits.baselines import (
    EMPTY,
    Baseline,
    floored,
    no_submission,
    perfect,
    public_sample,
)
from tasks_lib.challenge.card import load_challenge
from tasks_lib.challenge.format_example import write_format_example
from tasks_lib.storage import Storage

ANSWERS = "test_labels.csv"
"""The private answer table; its columns are the submission's."""


def _perfect(pool_url: str, folder: Path) -> Path:
    """The private answers as a submission: the answer table as ``submission.csv`` beside the
    label files it names (relative paths stay valid)."""
    private = Path(Storage(pool_url).root_path) / "private"
    shutil.copytree(private, folder, dirs_exist_ok=True)
    (folder / ANSWERS).rename(folder / "submission.csv")
    return folder


def challenge_baselines(task_id: str, pool_url: str, out: Path) -> list[Baseline]:
    """Every baseline of the challenge pool at ``pool_url``."""
    best = _perfect(pool_url, out / "perfect")
    empty = write_format_example(load_challenge(task_id), best, out / "empty")
    return [no_submission("challenge", out), floored("challenge", "empty", EMPTY, empty),
            *public_sample("challenge", pool_url, out), perfect(best)]
