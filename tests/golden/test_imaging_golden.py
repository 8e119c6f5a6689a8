"""Golden baseline scores per imaging task (``imaging_baselines.json``).

The ``perfect``, ``empty`` and ``constant`` submissions are the kit's own baselines
(``kit_for(track).baselines``, picked by name) scored as the exploit audit scores them
(:func:`tasks_lib.audits.scoring.score_folder`), so the pinned numbers are exactly the audit's
baselines. ``classical`` is no audit baseline (the kit does not write it): it is written by
:mod:`tasks_lib.imaging.baselines` and scored the same way.

Expected values were produced by these evaluators and checked by hand for the anchors: ``perfect``
scores 1 (PSNR at its 100 dB cap, HD95 0 mm), ``empty`` detection/segmentation scores 0 with the
one-empty HD95 penalty, blank text answers are invalid (S5 = 0). A change here means a metric,
generator or policy changed: bump ``EVALUATOR_VERSION`` and regenerate deliberately.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.imaging_pools import TASKS, build_pool

from tasks_lib.audits.baselines import CONSTANT, EMPTY, PERFECT
from tasks_lib.audits.pool import pool_info
from tasks_lib.audits.scoring import score_folder
from tasks_lib.compute import shared_dask
from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission
from tasks_lib.records import ScoreCard
from tasks_lib.tracks.base import kit_for

GOLDEN = Path(__file__).with_name("imaging_baselines.json")
KIT_BASELINES = {BaselineKind.PERFECT: PERFECT, BaselineKind.EMPTY: EMPTY,
                 BaselineKind.CONSTANT: CONSTANT}
"""Golden kind → the name of the kit baseline it pins."""


@pytest.fixture(scope="module")
def golden_pools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("golden-pools")
    return {t: build_pool(t, root)[0] for t in TASKS}


def submissions(pool_url: str, tmp: Path) -> dict[BaselineKind, Path]:
    """Each golden kind's submission folder: the kit's baseline of that name, and the
    ``classical`` baseline (not one of the kit's)."""
    from tasks_lib.imaging.pool import read_manifest

    info = pool_info(pool_url)
    shutil.rmtree(tmp, ignore_errors=True)
    written = {b.name: b.folder for b in kit_for(info.track).baselines(pool_url, tmp / "kit")}
    found = {kind: written[name] for kind, name in KIT_BASELINES.items()}
    classical = baseline_files(BaselineKind.CLASSICAL, pool_url, read_manifest(pool_url))
    found[BaselineKind.CLASSICAL] = write_submission(classical, tmp / "classical")
    return found


def observed(card: ScoreCard) -> dict[str, object]:
    """The golden fields of one baseline's score card."""
    assert card.validation is not None
    return {"task_score": card.task_score, "s4": card.s4, "s5": card.s5,
            "validation_ok": card.validation.ok, "metrics": card.metrics}


@pytest.mark.parametrize("task_id", TASKS)
def test_golden_baselines(task_id: str, golden_pools: dict[str, str], tmp_path: Path) -> None:
    expected = json.loads(GOLDEN.read_text())[task_id]
    url = golden_pools[task_id]
    info = pool_info(url)
    folders = submissions(url, tmp_path / task_id)
    assert set(folders) == set(BaselineKind) == {BaselineKind(k) for k in expected}
    # One Dask cluster for the four submissions of a Dask-scored card, as the exploit audit
    # scores its baselines (a LocalCluster start per submission is most of the test's CPU).
    with shared_dask():
        cards = {kind: score_folder(info, folder, f"golden-{kind.value}")
                 for kind, folder in folders.items()}
    for kind, card in cards.items():
        got = observed(card)
        exp = expected[kind.value]
        assert got["validation_ok"] == exp["validation_ok"], kind
        assert (got["s4"], got["s5"]) == (exp["s4"], exp["s5"]), kind
        assert got["task_score"] == pytest.approx(exp["task_score"], abs=1e-6), kind
        assert got["metrics"] == pytest.approx(exp["metrics"], abs=1e-6), kind


def test_perfect_anchors() -> None:
    golden = json.loads(GOLDEN.read_text())
    for task_id in TASKS:
        # METEOR's fragmentation penalty keeps a perfect report just below 1 (one chunk).
        assert golden[task_id]["perfect"]["task_score"] == pytest.approx(1.0, abs=1e-3)
        assert golden[task_id]["perfect"]["s5"] == 1.0
    assert golden["brain-tissue-seg"]["perfect"]["metrics"]["hd95"] == 0.0
    assert golden["brain-tissue-seg"]["empty"]["metrics"]["hd95"] == 373.13
    assert golden["brain-lesion-vqa"]["empty"]["s5"] == 0.0
