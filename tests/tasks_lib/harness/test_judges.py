"""Pure judge code: rubric post-processing, Agentic/Overall, error-code rules (hand-computed)."""

from __future__ import annotations

import pytest

from evaluators.judges.error_codes import ErrorCode, RunFacts, load_taxonomy, merge, rule_signals
from evaluators.judges.stages import (
    JudgeParseError,
    agentic_score,
    build_prompt,
    cache_key,
    load_rubric,
    overall_score,
    parse_judgement,
    snap,
)

TRACKS = ["segmentation", "detection", "enhancement", "vqa", "report_generation"]
S1_ALL_NO = ('{"items": {"clear_pipeline": "no", "model_fits_target": "no", '
             '"models_researched": "no", "diagram_clear": "yes"}, "rationale": "thin"}')


@pytest.mark.parametrize("track", TRACKS)
def test_every_track_has_s1_to_s3(track: str) -> None:
    rubric = load_rubric(track)
    assert set(rubric.stages) == {"s1", "s2", "s3"}
    assert rubric.stages["s3"].levels == [0.0, 0.5, 1.0]
    ids = {i.id for s in rubric.stages.values() for i in s.items}
    for stage in rubric.stages.values():
        assert all(set(i.requires) <= ids for i in stage.items)


def test_segmentation_s1_has_the_six_published_items() -> None:
    items = load_rubric("segmentation").stages["s1"].items
    assert len(items) == 6 and len(load_rubric("segmentation").stages["s2"].items) == 5
    assert [i.id for i in items if i.lite_credit] == ["models_researched", "plan_png_exists",
                                                      "diagram_clear"]


def test_s1_standard_files_override_and_dependencies() -> None:
    rubric = load_rubric("segmentation")
    # plan.md present → plan_exists = 1 (fact); plan.png absent → plan_png_exists = 0 and
    # diagram_clear ("yes") is zeroed by its dependency. 1 of 6 items → 1/6.
    j = parse_judgement(rubric, "s1", "standard", S1_ALL_NO, files=["plan.md"])
    assert j.items["plan_exists"] == 1.0 and j.items["diagram_clear"] == 0.0
    assert j.score == pytest.approx(1 / 6)


def test_s1_lite_credits_three_items() -> None:
    rubric = load_rubric("segmentation")
    j = parse_judgement(rubric, "s1", "lite", S1_ALL_NO, files=["plan.md"])
    assert j.score == pytest.approx(4 / 6)
    # without plan.md the clear_pipeline "yes" would be zeroed by the dependency rule
    reply = S1_ALL_NO.replace('"clear_pipeline": "no"', '"clear_pipeline": "yes"')
    assert parse_judgement(rubric, "s1", "lite", reply, files=[]).score == pytest.approx(3 / 6)


def test_s3_snaps_to_levels_and_parses_fenced_json() -> None:
    rubric = load_rubric("segmentation")
    reply = 'Sure.\n```json\n{"score": 0.7, "rationale": "pilot, partial checks"}\n```'
    assert parse_judgement(rubric, "s3", "lite", reply, files=[]).score == 0.5
    assert snap(0.76, [0.0, 0.5, 1.0]) == 1.0 and snap(0.25, [0.0, 0.5, 1.0]) == 0.0


@pytest.mark.parametrize("reply", ["no json here", '{"items": {"clear_pipeline": "maybe"}}',
                                   '{"rationale": "x"}'])
def test_malformed_judge_replies_raise(reply: str) -> None:
    with pytest.raises(JudgeParseError):
        parse_judgement(load_rubric("segmentation"), "s1", "lite", reply, files=[])


def test_prompt_and_cache_key() -> None:
    messages = build_prompt(load_rubric("vqa"), "s2", "standard", "TRACE", ["plan.md"])
    assert messages[0][0] == "system" and "TRACE" in messages[1][1]
    assert '"inputs_loaded": "yes"|"no"' in messages[1][1]
    key = cache_key("vqa-1", "abc", "gpt-4o-mini", "s2")
    assert key == cache_key("vqa-1", "abc", "gpt-4o-mini", "s2")
    assert key != cache_key("vqa-2", "abc", "gpt-4o-mini", "s2")


def test_agentic_and_overall_weights() -> None:
    stages: dict[str, float | None] = {"s1": 1.0, "s2": 0.6, "s3": 0.5, "s4": 1.0, "s5": 0.5}
    # 0.25 + 0.15·0.6 + 0.35·0.5 + 0.15 + 0.10·0.5 = 0.25 + 0.09 + 0.175 + 0.15 + 0.05 = 0.715
    assert agentic_score(stages, "lite") == pytest.approx(0.715)
    assert overall_score(0.715, 0.8, "lite") == pytest.approx(0.7575)
    assert agentic_score({**stages, "s2": None}, "standard") is None
    assert overall_score(None, 0.8, "lite") is None


def _facts(**overrides: object) -> RunFacts:
    base: dict[str, object] = dict(tool_outputs=["exit_code: 0"], codes_run=["print(x.shape)"],
                                   workspace_files=["plan.md"], submission_files=["a.nii.gz"],
                                   submitted=True, timed_out=False, s5_valid=True)
    return RunFacts.model_validate({**base, **overrides})


def test_clean_run_fires_nothing() -> None:
    assert rule_signals(_facts()) == []
    assert merge([], None).fired == []


def test_rule_signals_and_merge() -> None:
    crash = "Traceback (most recent call last):\n  ...\nKeyError: 'case_7'"
    facts = _facts(tool_outputs=[crash, crash, crash, "ModuleNotFoundError: No module named "
                                 "'monai'"], workspace_files=[], submission_files=[],
                   submitted=False)
    rules = rule_signals(facts)
    assert {e.code for e in rules} == {ErrorCode.E1, ErrorCode.E2, ErrorCode.E3, ErrorCode.E4,
                                       ErrorCode.E5}
    coded = merge(rules, None)
    assert coded.dominant is ErrorCode.E5  # two E5 signals (empty, never submitted)
    llm = '{"fired": ["E4"], "evidence": {"E4": "KeyError"}, "dominant": "E4"}'
    assert merge(rules, llm).dominant is ErrorCode.E4
    broken = merge(rules, "not json")
    assert broken.llm_error and broken.dominant is ErrorCode.E5


def test_taxonomy_has_five_codes_with_examples_per_track() -> None:
    codes = load_taxonomy().codes
    assert [c.code for c in codes] == list(ErrorCode)
    assert all(set(TRACKS) <= set(c.examples) for c in codes)
