"""MedBench metrics on the hand-computed cases of the spec (§11) and the acceptance (§13)."""

from __future__ import annotations

import math

import pytest

from evaluators.detection import box_iou
from evaluators.graders.medbench import (
    acc_all_variants,
    aggregate,
    iou_set,
    keypoint_macro_recall,
    keypoint_recall,
    macro_recall,
    mean_sd,
    micro_f1,
    ned_raw,
    one_minus_ned,
    rubric_judge,
    shuffled_accuracy,
    strict_letter,
    weighted_judge,
)
from evaluators.metrics import METRICS


def test_registered_under_the_issue_names() -> None:
    for name in ("shuffled_accuracy", "micro_f1", "keypoint_macro_recall", "iou_set",
                 "one_minus_ned"):
        assert name in METRICS
    assert METRICS.get("one_minus_ned")("kitten", "sitting") == pytest.approx(4 / 7)


def test_shuffled_accuracy_case_1() -> None:
    # options [甲,乙,丙,丁,戊], gold 丙: trial 1 shows it at C, trial 2 at A, trial 3 at C
    gold = {"q1#s0": "C", "q1#s1": "A", "q1#s2": "C"}
    replies = {"q1#s0": "C", "q1#s1": "C", "q1#s2": "C."}
    correct = {k: shuffled_accuracy(replies[k], gold[k]) for k in gold}
    assert correct == {"q1#s0": 1.0, "q1#s1": 0.0, "q1#s2": 1.0}
    assert sum(correct.values()) / 3 == pytest.approx(2 / 3)
    assert acc_all_variants(correct) == 0.0
    assert shuffled_accuracy("C and D", "C") == 0.0
    assert shuffled_accuracy(None, "C") == 0.0
    assert acc_all_variants({"a#s0": 1.0, "a#s1": 1.0, "b#s0": 1.0, "b#s1": 0.0}) == 0.5


@pytest.mark.parametrize(("reply", "letter"), [
    ("B", "B"), (" b. ", "B"), ("Reasoning...\nAnswer: D", "D"), ("分析\n答案：E", "E"),
    ("B.", "B"), ("B..", None), ("AB", None), ("The answer is B", None), ("", None),
])
def test_strict_extraction(reply: str, letter: str | None) -> None:
    assert strict_letter(reply) == letter


def test_micro_f1_case_2() -> None:
    preds = [["a", "b", "d"], [], ["f"]]
    golds = [["a", "b", "c"], ["e"], []]
    assert micro_f1(preds, golds) == 0.5  # TP 2, FP 2, FN 2
    assert micro_f1([[], []], [[], []]) == 1.0
    assert micro_f1([None], [["x"]]) == 0.0
    # normalisation: full width, case, duplicates once; tuples compared element-wise
    assert micro_f1([["ＡＢＣ", "abc"]], [["abc"]]) == 1.0
    assert micro_f1([[["Drug", "Aspirin "]], [["dose", "1 g"]]],
                    [[["drug", "aspirin"]], [["dose", "2 g"]]]) == 0.5


def test_micro_f1_over_error_labels_matches_scikit_learn_micro_average() -> None:
    from sklearn.metrics import f1_score
    from sklearn.preprocessing import MultiLabelBinarizer

    # MedQC by hand: item 1 gold {wrong side}, pred {wrong side, wrong size}; item 2 a correct
    # draft ({} vs {}); item 3 gold {missed finding, wrong size}, pred {missed finding}:
    # TP 2, FP 1, FN 1 ⇒ P = R = 2/3 ⇒ F1 = 2/3
    gold = [["wrong side"], [], ["missed finding", "wrong size"]]
    pred = [["wrong side", "wrong size"], [], ["missed finding"]]
    assert micro_f1(pred, gold) == pytest.approx(2 / 3)
    mlb = MultiLabelBinarizer().fit(gold + pred)
    ours_vs_sklearn = f1_score(mlb.transform(gold), mlb.transform(pred), average="micro")
    assert micro_f1(pred, gold) == pytest.approx(ours_vs_sklearn)
    # nothing to find, nothing predicted: 1, as scikit-learn's zero_division=1.0 (its default
    # "warn" gives 0.0: the spec's rule, not scikit-learn's default)
    empty = MultiLabelBinarizer(classes=["wrong side"]).fit([[]])
    assert micro_f1([[], []], [[], []]) == 1.0 == f1_score(
        empty.transform([[], []]), empty.transform([[], []]), average="micro", zero_division=1.0)
    # MedSeqIm [panel, position] pairs: panels 1 and 4 placed right, 2 and 3 swapped ⇒ 0.5
    seq_gold = [[["1", "4"], ["2", "2"], ["3", "1"], ["4", "3"]]]
    seq_pred = [[["1", "4"], ["2", "1"], ["3", "2"], ["4", "3"]]]
    assert micro_f1(seq_pred, seq_gold) == 0.5


def test_keypoint_macro_recall_case_3() -> None:
    assert macro_recall([3 / 4, 1 / 2, 2 / 2, 0 / 3]) == 0.5625
    kps = [["fever", "cough", "rash", "nausea"], ["insulin", "metformin"], ["x-ray", "ct"],
           ["aaa", "bbb", "ccc"]]
    answers = ["Fever and a COUGH with rash", "start insulin", "x-ray then CT", "nothing"]
    assert keypoint_macro_recall(answers, kps) == 0.5625
    # an item with zero key points is excluded from N; a missing answer has recall 0
    assert keypoint_recall("anything", []) is None
    assert keypoint_macro_recall(["fever", "x"], [["fever"], []]) == 1.0
    assert keypoint_macro_recall([None, "fever"], [["fever"], ["fever"]]) == 0.5


def test_iou_case_4() -> None:
    assert box_iou([0, 0, 10, 10], [5, 5, 15, 15]) == pytest.approx(25 / 175, abs=1e-6)
    assert iou_set([[0, 0, 10, 10]], [[5, 5, 15, 15]]) == pytest.approx(0.142857, abs=1e-6)
    assert iou_set([[0, 0, 10, 10]], [[0, 0, 10, 5]]) == 0.5
    assert iou_set([1, 2, 3, 4], [3, 4, 5]) == 0.4
    assert iou_set([], []) == 1.0
    assert iou_set([], [[0, 0, 1, 1]]) == 0.0 and iou_set(["a"], []) == 0.0
    # two gold boxes, three predicted (one invalid): Hungarian matching, / max(|P|, |G|)
    gold = [[0, 0, 10, 10], [20, 20, 30, 30]]
    pred = [[20, 20, 30, 30], [0, 0, 10, 5], [5, 5, 1, 1]]
    assert iou_set(pred, gold) == pytest.approx((1.0 + 0.5) / 3)


def test_one_minus_ned_case_5() -> None:
    assert one_minus_ned("阿莫西林胶囊", "阿莫西林") == 0.5
    assert one_minus_ned("I21.9", "I21.4") == pytest.approx(0.8)
    assert one_minus_ned("sitting", "kitten") == 0.5
    assert ned_raw("xyzw", "ab") == -1.0
    assert one_minus_ned("xyzw", "ab") == 0.0
    # empty-reference rule (stated as data on the registry entry too)
    assert one_minus_ned("", "") == 1.0 and one_minus_ned("x", " ") == 0.0
    assert METRICS.get("one_minus_ned").both_empty == 1.0
    assert METRICS.get("one_minus_ned").one_empty == 0.0
    assert one_minus_ned(None, "abc") == 0.0


def test_one_minus_ned_on_ocr_lines_and_rapidfuzz() -> None:
    from rapidfuzz.distance import Levenshtein

    line = "SE 1 IM 38 W 350 L 50 5.0 mm"  # 28 code points
    assert one_minus_ned("SE 1 IM 38 W 350 L 50 5.0mm", line) == pytest.approx(27 / 28)
    assert one_minus_ned("SE 1 IM 88 W 350 L 60 5.0 mm", line) == pytest.approx(26 / 28)
    assert one_minus_ned(line, line) == 1.0
    # d is RapidFuzz's Levenshtein distance; the normaliser is |r| (the paper), not RapidFuzz's
    # max(|r|, |r̂|): kitten → sitting is 1 − 3/6 here, 1 − 3/7 in normalized_similarity
    assert Levenshtein.distance("kitten", "sitting") == 3
    assert Levenshtein.normalized_similarity("kitten", "sitting") == pytest.approx(4 / 7)
    assert one_minus_ned("sitting", "kitten") == 0.5


def test_judge_case_6() -> None:
    assert sum(rubric_judge({"overall": s}, None) for s in (5, 4, 3, 0)) / 4 == 0.6
    scores = {"correctness": 4, "professionalism": 5, "safety": 3, "usability": 4}
    weights = {"correctness": 2, "professionalism": 1, "safety": 2, "usability": 1}
    assert weighted_judge(scores, weights) == pytest.approx(23 / 6)
    assert 100 * rubric_judge(scores, weights) == pytest.approx(76.67, abs=0.005)


def test_aggregation_case_8() -> None:
    tasks = {"mlu1": 80.0, "mlu2": 70.0, "mlg": 60.0, "mkqa": 58.0, "cmr": 59.0, "hse": 18.0}
    dims = {"mlu1": "MLU", "mlu2": "MLU", "mlg": "MLG", "mkqa": "MKQA", "cmr": "CMR",
            "hse": "HSE"}
    agg = aggregate(tasks, dims)
    assert agg.dimensions["MLU"] == 75.0
    assert agg.overall == pytest.approx(54.0)


def test_tasks_weigh_equally_whatever_their_size() -> None:
    small = [1.0] * 10  # 10 items, all right
    large = [0.0] * 10_000  # 10,000 items, all wrong
    tasks = {"small": 100 * sum(small) / len(small), "large": 100 * sum(large) / len(large)}
    agg = aggregate(tasks, {"small": "MKQA", "large": "MKQA"})
    assert agg.dimensions["MKQA"] == 50.0 and agg.overall == 50.0


def test_replicates_case_9() -> None:
    m = mean_sd([54.0, 55.2, 53.1])
    assert round(m.mean, 2) == 54.10 and round(m.sd, 2) == 1.05 and m.n == 3
    assert math.isnan(mean_sd([54.0]).sd)
