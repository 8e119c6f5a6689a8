"""Judge–human agreement: spec §11 case 7 by hand and against scikit-learn; rater aggregation."""

from __future__ import annotations

import math

import pytest
from sklearn.metrics import cohen_kappa_score

from evaluators.judges.medbench_calibration import (
    Aggregation,
    agreement,
    human_label,
    judge_label,
    round_half_down,
    status,
)

JUDGE = [5, 4, 4, 3, 0, 2, 5, 1, 3, 4]
HUMAN = [5, 4, 3, 3, 0, 2, 5, 2, 3, 4]


def test_kappa_case_7_by_hand_and_sklearn() -> None:
    a = agreement(JUDGE, HUMAN)
    assert a.n == 10 and a.p_o == pytest.approx(0.8)
    # judge counts {0:1,1:1,2:1,3:2,4:3,5:2}, human {0:1,2:2,3:3,4:2,5:2}
    assert a.p_e == pytest.approx((1 * 1 + 1 * 0 + 1 * 2 + 2 * 3 + 3 * 2 + 2 * 2) / 100)
    assert a.p_e == pytest.approx(0.19)
    assert a.kappa == pytest.approx(0.61 / 0.81, abs=1e-4)
    assert a.kappa == pytest.approx(0.7531, abs=1e-4)
    assert a.kappa == pytest.approx(cohen_kappa_score(JUDGE, HUMAN, labels=list(range(6))))
    assert a.kappa_quadratic == pytest.approx(
        cohen_kappa_score(JUDGE, HUMAN, labels=list(range(6)), weights="quadratic"))
    assert status(a.kappa, 30) == "uncalibrated"
    assert status(0.82, 30) == "calibrated" and status(0.9, 29) == "uncalibrated"


def test_kappa_undefined_when_chance_agreement_is_one() -> None:
    a = agreement([3, 3, 3], [3, 3, 3])
    assert a.p_o == 1.0 and a.p_e == 1.0 and math.isnan(a.kappa)
    assert status(a.kappa, 100) == "uncalibrated"


@pytest.mark.parametrize(("scores", "rule", "label"), [
    ([4, 4, 3], Aggregation.MAJORITY, 4),
    ([3, 4], Aggregation.MAJORITY, 3),        # tie: median 3.5 rounded half-down
    ([2, 5, 2, 5], Aggregation.MAJORITY, 3),  # tie: median 3.5 → 3
    ([1, 2, 3], Aggregation.MAJORITY, 2),     # all different: median 2
    ([4, 5], Aggregation.MEAN, 4),            # 4.5 half-down
    ([4, 5, 5], Aggregation.MEAN, 5),         # 4.67
])
def test_human_label(scores: list[int], rule: Aggregation, label: int) -> None:
    assert human_label(scores, rule) == label


def test_round_half_down() -> None:
    assert [round_half_down(x) for x in (2.5, 2.51, 3.0, 0.5)] == [2, 3, 3, 0]


def test_judge_label_rounds_five_times_the_score_half_up() -> None:
    # 0.7 · 5 = 3.5 → 4 and 0.1 · 5 = 0.5 → 1 (Python's round() would give 4 and 0)
    assert [judge_label(s) for s in (0.0, 0.1, 0.3, 0.5, 0.7, 0.69, 1.0)] == [0, 1, 2, 3, 4, 3, 5]
