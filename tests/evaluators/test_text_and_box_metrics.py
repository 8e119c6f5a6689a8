"""Hand-computed cases for detection, VQA and report-generation metrics."""

from __future__ import annotations

import pytest

from evaluators.detection import Boxes, box_iou, map_50, map_50_coco
from evaluators.report_generation import (
    bleu,
    finding_f1,
    label_findings,
    meteor,
    prf,
    report_score,
    rouge_l,
)
from evaluators.vqa import normalize_answer, vqa_exact_match


def test_box_iou() -> None:
    assert box_iou([0, 0, 2, 2], [1, 1, 3, 3]) == pytest.approx(1 / 7)
    assert box_iou([0, 0, 1, 1], [2, 2, 3, 3]) == 0.0
    assert box_iou([0, 0, 4, 2], [0, 0, 4, 2]) == 1.0
    # continuous coordinates: touching boxes share no area (no pixel-inclusive + 1)
    assert box_iou([0, 0, 2, 2], [2, 0, 4, 2]) == 0.0
    # a degenerate or inverted box overlaps nothing, even a box covering it
    assert box_iou([3, 0, 1, 2], [0, 0, 4, 2]) == 0.0
    assert box_iou([1, 1, 1, 3], [0, 0, 4, 4]) == 0.0
    assert box_iou([1, 1, 1, 1], [1, 1, 1, 1]) == 0.0


def test_map_50_hand_case() -> None:
    refs = [Boxes(boxes=[[0, 0, 10, 10], [50, 50, 60, 60]], labels=[1, 2]),
            Boxes(boxes=[[0, 0, 10, 10]], labels=[1])]
    preds = [Boxes(boxes=[[0, 0, 10, 10], [80, 80, 90, 90]], labels=[1, 3], scores=[0.9, 0.99]),
             Boxes(boxes=[[30, 30, 40, 40], [1, 1, 10, 10]], labels=[1, 1], scores=[0.8, 0.7])]
    # class 1: TP(.9) FP(.8) TP(.7): recall .5,.5,1; precision 1,.5,2/3 → AP = .5 + .5·2/3
    # class 2: no detection → 0; class 3 is absent from the references → ignored.
    assert map_50(preds, refs) == pytest.approx((0.5 + 0.5 * 2 / 3 + 0.0) / 2)
    perfect = [Boxes(boxes=r.boxes, labels=r.labels, scores=[1.0] * len(r.boxes)) for r in refs]
    assert map_50(perfect, refs) == 1.0
    assert map_50_coco(perfect, refs) == pytest.approx(1.0, abs=1e-9)
    assert map_50_coco([Boxes(boxes=[], labels=[])] * 2, refs) == 0.0


def test_duplicate_detection_is_a_false_positive() -> None:
    refs = [Boxes(boxes=[[0, 0, 10, 10]], labels=[1])]
    preds = [Boxes(boxes=[[0, 0, 10, 10], [0, 0, 10, 9]], labels=[1, 1], scores=[0.9, 0.8])]
    assert map_50(preds, refs) == 1.0  # the FP comes after full recall
    preds2 = [Boxes(boxes=[[0, 0, 10, 9], [0, 0, 10, 10]], labels=[1, 1], scores=[0.9, 0.8])]
    assert map_50(preds2, refs) == 1.0


@pytest.mark.parametrize(("pred", "ref", "expected"), [
    ("Yes.", "yes", 1.0), ("TRUE", "yes", 1.0), ("nope", "no", 1.0), ("The left.", "left", 1.0),
    ("three", "3", 1.0), ("An enlarged  heart!", "enlarged heart", 1.0), ("", "no", 0.0),
    (None, "no", 0.0), ("yes", "no", 0.0), ("2.5", "25", 0.0),
])
def test_vqa_exact_match(pred: str | None, ref: str, expected: float) -> None:
    assert vqa_exact_match(pred, ref) == expected


def test_normalizer_keeps_decimal_point() -> None:
    assert normalize_answer("2.5 cm.") == "2.5 cm"


def test_labeler_negation_and_prf() -> None:
    assert label_findings("A nodule in the left lobe. No effusion.") == {"nodule"}
    assert label_findings("Without calcification; mild atrophy") == {"atrophy"}
    assert label_findings("A hyperintense lesion, but no mass.") == {"hyperintensity"}
    r = prf(frozenset({"nodule", "mass"}), frozenset({"nodule", "effusion", "atrophy"}))
    assert (r.precision, r.recall) == (0.5, pytest.approx(1 / 3))
    assert r.f1 == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert finding_f1("Normal study.", "No acute findings.") == 1.0
    assert finding_f1("", "No acute findings.") == 0.0


def test_lexical_metrics_hand_cases() -> None:
    assert bleu("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1.0)
    # identical three words: one chunk, frag = 1/3, penalty = 0.5·(1/3)^3
    assert meteor("left lobe nodule", "left lobe nodule") == pytest.approx(1 - 0.5 / 27)
    # stems match without WordNet: "nodules" ~ "nodule"
    assert meteor("nodules", "nodule") == pytest.approx(meteor("nodule", "nodule"))
    assert rouge_l("the cat sat", "the cat ran") == pytest.approx(2 / 3)
    assert report_score("", "A nodule.") == 0.0


def test_meteor_equals_nltk_without_synonym_matches() -> None:
    from nltk.translate.meteor_score import meteor_score

    class Empty:
        def synsets(self, _w: str) -> list[object]:
            return []

    hyp, ref = "mild volume loss of the brain", "the brain shows mild volume loss"
    expected = meteor_score([ref.split()], hyp.split(), wordnet=Empty())  # type: ignore[arg-type]
    assert meteor(hyp, ref) == pytest.approx(expected)
