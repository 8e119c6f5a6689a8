"""Hand-computed RWE-bench metric cases (spec §5 worked example, §8.4, §11 checks 1–5, 9, 11)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluators.core import InvalidSubmissionError
from evaluators.graders.rwe import (
    Estimate,
    cardinality_bins,
    hard_subset,
    judge_metrics,
    macro,
    regulatory_agreement,
    replicate_counts,
    score_study,
    significance_match,
)
from evaluators.graders.rwe_answers import Kind, Question, QuestionTree, check_answer, visible
from evaluators.metrics import METRICS


def q(qid: str, kind: Kind, answer: object, gate: str | None = None,
      pair_of: str | None = None) -> Question:
    options = ["A", "B", "C"] if kind is Kind.MCQ else []
    return Question(question_id=qid, kind=kind, answer=answer, gate=gate,  # type: ignore[arg-type]
                    pair_of=pair_of, options=options)


def result(prefix: str, gate: str, ratio: float, ci: list[float], p: object) -> list[Question]:
    return [q(f"{prefix}_r", Kind.RATIO, ratio, gate), q(f"{prefix}_ci", Kind.CI, ci, gate,
                                                         f"{prefix}_r"),
            q(f"{prefix}_p", Kind.P_VALUE, p, gate)]


# The three-task worked example of spec §5.
T1 = QuestionTree(questions=[q("q1", Kind.MCQ, "A"), *result("R1", "q1", 0.72, [0.61, 0.85],
                                                              "<0.001"),
                             q("q2", Kind.MCQ, "B"), *result("R2", "q2", 1.10, [0.95, 1.28],
                                                              0.21)])
A1 = {"q1": "A", "R1_r": 0.80, "R1_ci": [0.70, 0.93], "R1_p": 0.003,
      "q2": "b", "R2_r": 1.31, "R2_ci": [1.05, 1.63], "R2_p": 0.02}
T2 = QuestionTree(questions=[q("q1", Kind.MCQ, "C"), *result("R1", "q1", 2.10, [1.50, 2.94],
                                                              "<0.001")])
A2 = {"q1": "A"}
T3 = QuestionTree(questions=[q("q1", Kind.MCQ, "A"), *result("R1", "q1", 0.55, [0.40, 0.76],
                                                              "<0.001")])
A3 = {"q1": "A", "R1_r": 0.60, "R1_ci": [0.45, 0.81], "R1_p": 0.001}


def test_regulatory_agreement_worked_pairs() -> None:
    ref = Estimate(0.72, 0.61, 0.85)
    assert regulatory_agreement(Estimate(0.80, 0.70, 0.93), ref) == 1.0
    assert regulatory_agreement(Estimate(1.31, 1.05, 1.63), Estimate(1.10, 0.95, 1.28)) == 0.0
    both_ns = (Estimate(0.97, 0.85, 1.11), Estimate(1.10, 0.95, 1.28))
    assert regulatory_agreement(*both_ns) == 1.0
    assert regulatory_agreement(*both_ns, strict_direction=True) == 0.0
    # opposite significant directions; a bound equal to 1 includes 1
    assert regulatory_agreement(Estimate(1.5, 1.2, 1.9), ref) == 0.0
    assert regulatory_agreement(Estimate(0.8, 0.64, 1.0), ref) == 0.0
    # malformed triples
    assert regulatory_agreement(Estimate(0.5, 0.6, 0.9), ref) == 0.0
    assert regulatory_agreement(Estimate(0.8, None, 0.9), ref) == 0.0
    assert regulatory_agreement(Estimate(None, 0.6, 0.9), ref) == 0.0


def test_significance_match() -> None:
    assert significance_match(0.003, "<0.001") == 1.0
    assert significance_match(0.02, 0.21) == 0.0
    assert significance_match(0.05, 0.21) == 1.0          # p = α is not significant
    assert significance_match(0.05, "<0.05") == 0.0        # '<0.05' is significant
    assert significance_match("NS", ">0.05") == 1.0
    assert significance_match(None, 0.21) == 0.0
    assert significance_match("abc", 0.21) == 0.0


def test_worked_example_study_scores() -> None:
    s1, s2, s3 = score_study(T1, A1), score_study(T2, A2), score_study(T3, A3)
    assert (s1.acc, s1.rar, s1.smr, s1.sr, s1.cr) == (1.0, 0.5, 0.5, 0.0, 1.0)
    assert (s2.acc, s2.rar, s2.smr, s2.sr, s2.cr) == (0.0, 0.0, 0.0, 0.0, 1.0)
    assert (s3.acc, s3.rar, s3.smr, s3.sr, s3.cr) == (1.0, 1.0, 1.0, 1.0, 1.0)
    runs = [s1, s2, s3]
    assert round(100 * macro([s.acc for s in runs]), 1) == 66.7  # type: ignore[operator]
    assert 100 * macro([s.rar for s in runs]) == 50.0  # type: ignore[operator]
    assert 100 * macro([s.smr for s in runs]) == 50.0  # type: ignore[operator]
    assert round(100 * macro([s.sr for s in runs]), 1) == 33.3  # type: ignore[operator]
    assert macro([s.cr for s in runs]) == 1.0
    micro = (2 + 0 + 1) / (2 + 1 + 1)
    assert micro == 0.75
    assert s1.n_fields == 6 and s2.n_fields == 3


def test_wrong_gate_hides_fields_and_they_score_zero() -> None:
    # The agent answers the gated fields "correctly" anyway: hidden fields never count.
    answers = {"q1": "B", "R1_r": 2.10, "R1_ci": [1.50, 2.94], "R1_p": 0.0001}
    assert visible(T2, answers) == ["q1"]
    s = score_study(T2, answers)
    assert s.per_question == {"q1": 0.0, "R1_r": 0.0, "R1_p": 0.0}
    assert s.hidden == ["R1_r", "R1_ci", "R1_p"]
    assert s.cr == 1.0  # only q1 was visible and it was answered
    # right gate, fields left unanswered: visible but unanswered ⇒ incomplete
    partial = score_study(T2, {"q1": "C"})
    assert (partial.acc, partial.rar, partial.smr, partial.cr) == (1.0, 0.0, 0.0, 0.0)
    assert visible(T2, {"q1": "c"}) == ["q1", "R1_r", "R1_ci", "R1_p"]


def test_nested_gate_needs_its_parent() -> None:
    tree = QuestionTree(questions=[q("g1", Kind.MCQ, "A"), q("g2", Kind.MCQ, "B", gate="g1"),
                                   q("n", Kind.COUNT, 10, gate="g2")])
    assert visible(tree, {"g1": "C", "g2": "B"}) == ["g1"]
    assert visible(tree, {"g1": "A", "g2": "B"}) == ["g1", "g2", "n"]
    # descriptive fields count for CR only
    s = score_study(tree, {"g1": "A", "g2": "B"})
    assert (s.acc, s.rar, s.smr, s.sr, s.cr) == (1.0, None, None, 1.0, 0.0)


def test_registered_metrics_match_study_score() -> None:
    assert METRICS.get("rwe_acc")(A1, T1) == 1.0
    assert METRICS.get("rwe_rar")(A1, T1) == 0.5
    assert METRICS.get("rwe_smr")(A1, T1) == 0.5
    assert METRICS.get("rwe_sr")(A3, T3) == 1.0
    assert METRICS.get("rwe_cr")({}, T3) == 0.0
    no_ratio = QuestionTree(questions=[q("g", Kind.MCQ, "A")])
    assert math.isnan(METRICS.get("rwe_rar")({"g": "A"}, no_ratio))


@pytest.mark.parametrize(("counts", "n", "mean", "se"), [
    ((60, 66, 68), 162, 39.92, 1.48), ((5, 8, 9), 32, 22.92, 3.76),
    ((161, 161, 161), 162, 99.38, 0.00)])
def test_replicate_aggregation(counts: tuple[int, ...], n: int, mean: float, se: float) -> None:
    r = replicate_counts(counts, n)
    assert (round(r.mean, 2), round(r.se or 0.0, 2), r.n) == (mean, se, 3)


def test_single_replicate_has_no_se() -> None:
    assert replicate_counts([3], 4).se is None


@pytest.mark.parametrize(("question", "bad"), [
    (q("m", Kind.MCQ, "A"), "D"), (q("m", Kind.MCQ, "A"), 1), (q("r", Kind.RATIO, 1.0), 0),
    (q("r", Kind.RATIO, 1.0), "x"), (q("c", Kind.CI, [1, 2]), [2.0, 1.0]),
    (q("c", Kind.CI, [1, 2]), 1.5), (q("p", Kind.P_VALUE, 0.1), 1.5),
    (q("p", Kind.P_VALUE, 0.1), "p<<1"), (q("n", Kind.COUNT, 3), 2.5),
    (q("n", Kind.COUNT, 3), -1), (q("a", Kind.AUC, 0.6), 1.2),
    (q("s", Kind.PROPORTION, 40), 140), (q("x", Kind.NUMERIC, 1), float("nan"))])
def test_malformed_answers_are_refused(question: Question, bad: object) -> None:
    with pytest.raises(InvalidSubmissionError):
        check_answer(question, bad)  # type: ignore[arg-type]


def test_well_typed_answers_pass() -> None:
    for question, good in [(q("m", Kind.MCQ, "A"), "b"), (q("p", Kind.P_VALUE, 0.1), "<0.001"),
                           (q("p", Kind.P_VALUE, 0.1), 0.2), (q("c", Kind.CI, [1, 2]), [0.5, 0.9]),
                           (q("n", Kind.COUNT, 3), 12), (q("s", Kind.PROPORTION, 40), 55.5)]:
        check_answer(question, good)  # type: ignore[arg-type]


REASONMED = {  # (TP, FN, TN, FP) → published Sens/Spec/PPV/NPV, Table 11 (spec §8.4)
    (82, 11, 39, 8): (88.2, 83.0, 91.1, 78.0), (88, 12, 34, 6): (88.0, 85.0, 93.6, 73.9),
    (96, 4, 34, 6): (96.0, 85.0, 94.1, 89.5), (73, 6, 18, 43): (92.4, 29.5, 62.9, 75.0),
    (72, 28, 31, 9): (72.0, 77.5, 88.9, 52.5), (65, 35, 29, 11): (65.0, 72.5, 85.5, 45.3),
    (18, 82, 37, 3): (18.0, 92.5, 85.7, 31.1), (93, 7, 33, 7): (93.0, 82.5, 93.0, 82.5),
    (82, 18, 29, 11): (82.0, 72.5, 88.2, 61.7), (88, 9, 35, 8): (90.7, 81.4, 91.7, 79.5)}


@pytest.mark.parametrize(("cm", "published"), list(REASONMED.items()))
def test_judge_metrics_reproduce_reasonmed_rows(cm: tuple[int, int, int, int],
                                                published: tuple[float, ...]) -> None:
    got = judge_metrics(*cm)
    assert all(abs(g - p) <= 0.1 for g, p in zip(got, published, strict=True))  # type: ignore


def test_cardinality_bins_and_hard_subset() -> None:
    cards = [(f"t{i:03d}", 3 + i % 9) for i in range(162)]
    bins = cardinality_bins(cards)
    assert [len(b) for b in bins] == [21, 21, 20, 20, 20, 20, 20, 20]
    assert sorted(t for b in bins for t in b) == sorted(t for t, _ in cards)
    ordered = [t for t, _ in sorted(cards, key=lambda c: (c[1], c[0]))]
    assert [list(b) for b in np.array_split(np.array(ordered), 8)] == bins
    hard = hard_subset(cards)  # n_fields 9, 10, 11 ⇔ i % 9 in (6, 7, 8): 3 × 18 cards
    assert len(hard) == 54 and "t006" in hard and "t005" not in hard


def test_ci_as_two_bound_fields() -> None:
    tree = QuestionTree(questions=[
        q("g", Kind.MCQ, "A"), q("or", Kind.RATIO, 0.5, "g"),
        Question(question_id="lo", kind=Kind.CI, answer=0.4, gate="g", pair_of="or",
                 bound="lower"),
        Question(question_id="hi", kind=Kind.CI, answer=0.62, gate="g", pair_of="or",
                 bound="upper")])
    assert score_study(tree, {"g": "A", "or": 0.6, "lo": 0.5, "hi": 0.8}).rar == 1.0
    assert score_study(tree, {"g": "A", "or": 0.9, "lo": 0.7, "hi": 1.1}).rar == 0.0
    missing = score_study(tree, {"g": "A", "or": 0.6, "lo": 0.5})
    assert (missing.rar, missing.cr) == (0.0, 0.0)
    with pytest.raises(InvalidSubmissionError):
        check_answer(tree.get("lo"), -0.1)
