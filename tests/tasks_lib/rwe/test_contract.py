"""Track contract of the RWE kit: the baseline submissions (perfect, empty, constant) scored by
the metric code agree with golden ACC/RAR/SMR/SR/CR values worked out independently from each
study card's question tree (gates, their keys, which fields each gate reveals).

* perfect (the reference answers): every gate right, every field aligned: 1/1/1/1/1.
* empty (no answer): every gate unanswered hides its fields, the opening questions stay
  unanswered: 0/0/0/0/0.
* constant (option A, ratio and CI bounds 1.0, p = 0.5): gate g is right iff the card's key gives
  A for the reference CI side; its ratio is then aligned iff that side is "includes 1" (a CI
  1.0–1.0 includes 1) and its p-value iff the reference p is not significant; every shown
  question is answered, so CR = 1. The option A stands for is read off the cards by hand
  (``A_MEANS``); the reference sides come from the pool's printed CI bounds.
"""

from __future__ import annotations

import math

import pytest

from evaluators.graders.rwe import score_study
from evaluators.graders.rwe_answers import QuestionTree
from tasks_lib.rwe.baselines import baseline_answers
from tasks_lib.rwe.pool_files import load_study_pool
from tasks_lib.rwe.questions import question_tree
from tasks_lib.storage import Storage

A_MEANS = {  # study → gate → CI side option "A" answers (datasets/rwe/<id>/study.yaml keys)
    "albumin-ap": {"q1": "lower", "q2": "higher"},
    "diuretic-hyponatremia-hf": {"q1": "higher", "q2": "null"},
    "glucose-ich": {"q1": "null", "q2": "lower"},
    "lactate-hf": {"q1": "null", "q2": "lower"},
    "nlr-sepsis-htn": {"q1": "null", "q2": "higher"},
    "ppi-influenza-null": {"q1": "higher", "q2": "lower"},
    "statin-sepsis": {"q1": "higher", "q2": "null"},
    "statin-sepsis-cc": {"q1": "lower", "q2": "higher"},
}
GATED = {  # study → gate → (ratio field, p-value field or None) it reveals (by hand, cards)
    "albumin-ap": {"q1": ("or_low_albumin", "p_low_albumin"), "q2": ("or_per_g", None)},
    "diuretic-hyponatremia-hf": {"q1": ("pr_loop", "p_loop"), "q2": ("pr_sofa", None)},
    "glucose-ich": {"q1": ("hr_glucose", "p_logrank"), "q2": ("hr_per_50", None)},
    "lactate-hf": {"q1": ("or_t3", "p_trend"), "q2": ("or_t2", None)},
    "nlr-sepsis-htn": {"q1": ("hr_q4", "p_q4"), "q2": ("hr_ln_nlr", None)},
    "ppi-influenza-null": {"q1": ("or_ppi", "p_ppi"), "q2": ("rr_ppi", None)},
    "statin-sepsis": {"q1": ("or_statin", "p_statin"), "q2": ("hr_statin", None)},
    "statin-sepsis-cc": {"q1": ("or_statin", "p_statin"), "q2": ("or_sofa8", None)},
}


def _side(lo: float, hi: float) -> str:
    return "higher" if lo > 1 else "lower" if hi < 1 else "null"


def _significant(printed: str) -> bool:
    if printed.startswith("<"):
        return float(printed[1:]) <= 0.05
    return not printed.startswith(">") and float(printed) < 0.05


def constant_golden(study: str, ref: dict[str, object]) -> tuple[float, float, float, float,
                                                                  float]:
    """(ACC, RAR, SMR, SR, CR) of the constant agent, by the rules in the module docstring."""
    mcq, ratios, pvals = [], [], []
    for gate, (ratio, p) in GATED[study].items():
        side = _side(float(ref[f"{ratio}_lo"]), float(ref[f"{ratio}_hi"]))  # type: ignore[arg-type]
        right = A_MEANS[study][gate] == side
        mcq.append(float(right))
        ratios.append(float(right and side == "null"))
        if p is not None:
            pvals.append(float(right and not _significant(str(ref[p]))))
    scored = mcq + ratios + pvals
    return (sum(mcq) / len(mcq), sum(ratios) / len(ratios), sum(pvals) / len(pvals),
            float(all(v == 1.0 for v in scored)), 1.0)


def scored(kind: str, tree: QuestionTree) -> tuple[float | None, ...]:
    """(ACC, RAR, SMR, SR, CR) the metric code gives baseline ``kind``."""
    s = score_study(tree, baseline_answers(kind, tree))
    return (s.acc, s.rar, s.smr, s.sr, s.cr)


@pytest.mark.slow
def test_baselines_match_the_golden_values() -> None:
    from tests.tasks_lib.rwe.pool_support import built_pool

    pool = load_study_pool(Storage(built_pool().url))
    assert {s.study_id for s in pool.studies} == set(GATED)
    seen_constant = set()
    for study in pool.studies:
        key = pool.answers[study.study_id]
        tree = question_tree(study, key)
        ref = {q.question_id: q.answer for q in tree.questions}
        assert scored("perfect", tree) == (1.0, 1.0, 1.0, 1.0, 1.0), study.study_id
        assert scored("empty", tree) == (0.0, 0.0, 0.0, 0.0, 0.0), study.study_id
        golden = constant_golden(study.study_id, ref)
        constant = scored("constant", tree)
        assert all(math.isclose(a or 0.0, b) for a, b in zip(constant, golden, strict=True)), (
            study.study_id, constant, golden)
        seen_constant.add(golden)
    assert len(seen_constant) > 1  # the constant agent is not uniformly right or wrong
