"""Golden baseline scores per imaging task (``imaging_baselines.json``).

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
from support.imaging_pools import TASKS, build_pool, score

from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission

GOLDEN = Path(__file__).with_name("imaging_baselines.json")


@pytest.fixture(scope="module")
def golden_pools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("golden-pools")
    return {t: build_pool(t, root)[0] for t in TASKS}


def observed(task_id: str, pool_url: str, kind: BaselineKind, tmp: Path) -> dict[str, object]:
    """The golden fields of one baseline's score card."""
    from tasks_lib.imaging.pool import read_manifest

    out = tmp / f"{task_id}-{kind.value}"
    shutil.rmtree(out, ignore_errors=True)
    write_submission(baseline_files(kind, pool_url, read_manifest(pool_url)), out)
    card = score(task_id, pool_url, out)
    return {"task_score": card.task_score, "s4": card.s4, "s5": card.s5,
            "validation_ok": card.validation.ok, "metrics": card.metrics}


@pytest.mark.parametrize("task_id", TASKS)
def test_golden_baselines(task_id: str, golden_pools: dict[str, str], tmp_path: Path) -> None:
    expected = json.loads(GOLDEN.read_text())[task_id]
    for kind in BaselineKind:
        got = observed(task_id, golden_pools[task_id], kind, tmp_path)
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
