"""MedBench rubric judges, pure parts: rubric files, prompts, strict parsing, caps, rules judge."""

from __future__ import annotations

import pytest

from evaluators.core import InputDataError
from evaluators.judges.medbench import (
    JudgeCase,
    build_prompt,
    capped,
    item_value,
    load_rubric,
    parse_score,
    rules_score,
)

CASE = JudgeCase(item_id="t/1", question="Dose of amoxicillin for otitis?", answer="ans",
                 gold="amoxicillin 80-90 mg/kg/day in two doses",
                 key_points=["amoxicillin", "two doses"])


@pytest.mark.parametrize("rubric_id", ["general_qa", "medication", "image_reasoning",
                                       "temporal_imaging", "safety_ethics"])
def test_rubrics_are_versioned_data_with_anchors(rubric_id: str) -> None:
    rubric = load_rubric(rubric_id)
    assert sorted(rubric.anchors) == [0, 1, 2, 3, 4, 5] and rubric.version.startswith(rubric_id)
    prompt = build_prompt(rubric, "safety", CASE)
    for part in ("Task ID: t/1", CASE.question, CASE.answer, CASE.gold, "two doses",
                 "<score>N</score>", rubric.anchors[0]):
        assert part in prompt


def test_unknown_rubric_lists_known() -> None:
    with pytest.raises(InputDataError, match="general_qa"):
        load_rubric("nope")


@pytest.mark.parametrize(("reply", "score"), [
    ("Reasoning here.\nTask ID: x\n<score>4</score>", 4),
    ("<SCORE> 0 </SCORE> trailing", 0),
    ("<score>6</score>", None),
    ("<score>4.5</score>", None),
    ("<score>4</score> and <score>5</score>", None),
    ("score: 4", None),
    ("", None),
])
def test_strict_parse(reply: str, score: int | None) -> None:
    assert parse_score(reply) == score


def test_temporal_wrong_direction_caps_at_two() -> None:
    rubric = load_rubric("temporal_imaging")
    assert capped(5, rubric, direction_correct=False) == 2
    assert capped(5, rubric, direction_correct=True) == 5
    assert capped(5, load_rubric("general_qa"), direction_correct=False) == 5


def test_weights_rubric_defaults_and_task_override() -> None:
    scores = {"correctness": 4, "professionalism": 5, "safety": 3, "usability": 4}
    # medication rubric weights 2,1,2,1 ⇒ 23/6 / 5 (spec §11 case 6)
    assert item_value(scores, load_rubric("medication")) == pytest.approx(23 / 30)
    assert item_value(scores, load_rubric("general_qa")) == pytest.approx(16 / 20)
    assert item_value(scores, load_rubric("general_qa"), {"safety": 0.0}) == pytest.approx(13 / 15)


def test_rules_judge_scores_keypoint_coverage() -> None:
    assert rules_score(CASE.model_copy(update={"answer": "Give amoxicillin in two doses"})) == 5
    assert rules_score(CASE.model_copy(update={"answer": "amoxicillin"})) == 3  # round(2.5)
    assert rules_score(CASE.model_copy(update={"answer": "rest"})) == 0
