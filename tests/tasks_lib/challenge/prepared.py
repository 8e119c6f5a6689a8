"""Helpers of the ``challenge prepare`` tests: prepare a replica into a pool, grade the kit's
perfect baseline on it, check ReX-MLE's split, expect a refusal."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from sklearn.model_selection import train_test_split


def prepare(task_id: str, release: Path, out: Path) -> Path:
    from tasks_lib.challenge.pool import publish_prepared_pool

    url, manifest = publish_prepared_pool(task_id, release, str(out))
    assert all(c.origin.startswith("official release: ") for c in manifest.cases)
    assert all((Path(url) / "public" / c.image).is_file() for c in manifest.cases if c.image)
    assert all(c.image for c in manifest.cases)
    return Path(url)


def perfect_metrics(task_id: str, pool: Path, tmp: Path) -> dict[str, float]:
    """The kit's perfect baseline (the private answers as a submission), graded."""
    from tasks_lib.challenge.baselines import _perfect
    from tasks_lib.challenge.card import load_challenge
    from tasks_lib.challenge.grade import grade_submission

    folder = _perfect(str(pool), tmp / "perfect")
    metrics, n = grade_submission(load_challenge(task_id), folder, pool / "private")
    assert n == len(pd.read_csv(pool / "private" / "test_labels.csv"))
    return metrics


def split(pool: Path, ids: list[str]) -> tuple[list[str], list[str]]:
    test = pd.read_csv(pool / "private" / "test_labels.csv", dtype=str).iloc[:, 0].tolist()
    val = pd.read_csv(pool / "public" / "validation" / "reference" / "test_labels.csv",
                      dtype=str).iloc[:, 0].tolist()
    train_ref, test_ref = train_test_split(sorted(ids), test_size=0.2, random_state=42,
                                           shuffle=True)
    assert (sorted(val), sorted(test)) == (sorted(train_ref), sorted(test_ref))
    return val, test


def broken(release: Path, tmp: Path) -> Path:
    copy = tmp / "release"
    shutil.copytree(release, copy)
    return copy


def refusal(task_id: str, release: Path, tmp: Path) -> str:
    from tasks_lib.errors import InputDataError

    out = tmp / "pool"
    with pytest.raises(InputDataError) as err:
        prepare(task_id, release, out)
    assert not out.exists()
    return str(err.value)
