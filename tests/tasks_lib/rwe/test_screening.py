"""Cohort screening: the rules, the seeded judge sample, τ, the judge through the call layer
(fake OpenAI-compatible server) and its CohortEval metrics (spec §6, §11 checks 7–9)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.openai_server import FakeOpenAIServer

from tasks_lib.llm import LiteLLMCompletion
from tasks_lib.rwe.cohort_judge import (
    ADVERSARIAL_CUE,
    CohortJudge,
    eval_set,
    evaluate_judge,
    judge_cohort,
    sample_cases,
)
from tasks_lib.rwe.screening import MAX_ROWS, IdIndex, rule_screen
from tests.tasks_lib.rwe.study_fixture import make_study

STUDY, _ = make_study()
CONTRACT = STUDY.protocol.cohort  # subject_id + anchor_age (eligible if >= 18)
INDEX = IdIndex(subjects={10000001 + i for i in range(200)}, admissions=set(), stays=set())
REFERENCE = pd.DataFrame({"subject_id": [10000001 + i for i in range(150)],
                          "anchor_age": [40 + i % 40 for i in range(150)]})


def write(tmp_path: Path, frame: pd.DataFrame, name: str = "cohort.csv") -> Path:
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def rules(tmp_path: Path, frame: pd.DataFrame) -> Any:
    return rule_screen(write(tmp_path, frame), CONTRACT, INDEX, REFERENCE)[1]


def test_empty_file_and_missing_file_are_invalid(tmp_path: Path) -> None:
    empty = rules(tmp_path, pd.DataFrame({"subject_id": [], "anchor_age": []}))
    assert not empty.valid and [f.rule for f in empty.findings] == ["empty"]
    missing = rule_screen(tmp_path / "none.csv", CONTRACT, INDEX, REFERENCE)[1]
    assert not missing.valid and not missing.qualified


def test_one_fabricated_subject_id_is_caught_by_id(tmp_path: Path) -> None:
    frame = REFERENCE.head(10).copy()
    frame.loc[3, "subject_id"] = 19999999
    s = rules(tmp_path, frame)
    assert not s.valid and s.fabricated == ["19999999"]
    assert s.precision == 0.9 and s.recall == 9 / 150


def test_size_rule_at_50000_rows(tmp_path: Path) -> None:
    ok = pd.DataFrame({"subject_id": [10000001 + i % 150 for i in range(MAX_ROWS)],
                       "anchor_age": 50})
    over = pd.concat([ok, ok.head(1)])
    assert "too_large" not in [f.rule for f in rules(tmp_path, ok).findings]
    s = rules(tmp_path, over)
    assert [f.rule for f in s.findings] == ["too_large"] and s.n_rows == 0


def test_soft_rules_duplicates_declared_contradiction_ineligible(tmp_path: Path) -> None:
    frame = pd.DataFrame({"subject_id": [10000001, 10000001, 10000002, 10000003, 10000180],
                          "anchor_age": [40, 40, 17, 99, 50]})
    s = rules(tmp_path, frame)
    by = {f.rule: f for f in s.findings}
    assert by["duplicates"].ids == ["10000001"]
    assert by["declared_ineligible"].ids == ["10000002"]          # 17 < 18
    assert by["contradicts_database"].ids == ["10000002", "10000003"]  # db: 41, 42
    assert by["ineligible"].ids == ["10000180"]                    # exists, not eligible
    assert s.valid  # soft findings: the judge decides the qualification


def test_missing_columns_and_non_integer_ids(tmp_path: Path) -> None:
    s = rules(tmp_path, pd.DataFrame({"subject_id": [10000001]}))
    assert [f.rule for f in s.findings] == ["missing_columns"] and not s.valid
    s = rules(tmp_path, pd.DataFrame({"subject_id": ["abc"], "anchor_age": [40]}))
    assert [f.rule for f in s.findings] == ["unreadable"]


def test_sample_is_min_100_n_and_seeded() -> None:
    big = pd.DataFrame({"subject_id": range(500)})
    assert len(sample_cases(big, 7)) == 100 and len(sample_cases(big.head(40), 7)) == 40
    assert sample_cases(big, 7).equals(sample_cases(big, 7))
    assert not sample_cases(big, 7).equals(sample_cases(big, 8))


@pytest.mark.parametrize(("bad", "qualified"), [(12, True), (20, True), (25, False)])
def test_exclusion_rate_threshold(tmp_path: Path, bad: int, qualified: bool) -> None:
    frame = REFERENCE.head(100).copy()
    frame.loc[: bad - 1, "anchor_age"] = 10  # the rules judge excludes these
    index = IdIndex(subjects=set(frame["subject_id"]), admissions=set(), stays=set())
    table, screen = rule_screen(write(tmp_path, frame), CONTRACT, index, None)
    assert table is not None
    judged = judge_cohort(screen, table, STUDY.protocol, CohortJudge("rules"), seed=1)
    assert (judged.sampled, judged.excluded) == (100, bad)
    assert judged.exclusion_rate == bad / 100 and judged.qualified is qualified


def _llm_judge(request: dict[str, Any]) -> str:
    """A stand-in model: excludes when the case's age is below 18 unless a note reassures it
    (so adversarial negatives fool it); replies with chatter around the JSON."""
    prompt = request["messages"][-1]["content"]
    case = json.loads(prompt.split("Patient case (one row of the cohort table the analyst "
                                   "submitted):\n", 1)[1].split("\n", 1)[0])
    exclude = case["anchor_age"] < 18 and "note" not in case
    return f'Reasoning done. {{"violations": [], "exclude": {json.dumps(exclude)}}}'


def test_llm_judge_through_the_call_layer(tmp_path: Path) -> None:
    frame = REFERENCE.head(30).copy()
    frame.loc[:5, "anchor_age"] = 16
    index = IdIndex(subjects=set(frame["subject_id"]), admissions=set(), stays=set())
    table, screen = rule_screen(write(tmp_path, frame), CONTRACT, index, None)
    assert table is not None
    with FakeOpenAIServer(_llm_judge) as srv:
        judge = CohortJudge("openai/fake-judge", LiteLLMCompletion(api_base=srv.base_url,
                                                                   cache=False))
        judged = judge_cohort(screen, table, STUDY.protocol, judge, seed=3)
        prompt = srv.requests[0]["messages"][-1]["content"]
    assert "Assuming this subject was included" in prompt and "anchor_age" in prompt
    assert (judged.sampled, judged.excluded, judged.judge_errors) == (30, 6, 0)
    assert judged.exclusion_rate == 0.2 and judged.qualified


def test_judge_metrics_on_a_cohorteval_set() -> None:
    cases = eval_set(REFERENCE, STUDY.protocol, seed=5)
    labels = [eligible for _, eligible in cases]
    assert (labels.count(True), labels.count(False), len(cases)) == (100, 40, 140)
    assert sum(c.get("note") == ADVERSARIAL_CUE for c, _ in cases) == 10
    perfect = evaluate_judge(CohortJudge("rules"), STUDY.protocol, cases)
    assert perfect == (100.0, 100.0, 100.0, 100.0)
    with FakeOpenAIServer(_llm_judge) as srv:
        fooled = evaluate_judge(CohortJudge("openai/fake-judge", LiteLLMCompletion(
            api_base=srv.base_url, cache=False)), STUDY.protocol, cases)
    # TP 100, FN 0; the 10 adversarial negatives are kept: TN 30, FP 10
    assert fooled == (100.0, 75.0, 100 * 100 / 110, 100.0)


def test_a_judge_that_fails_on_every_case_disqualifies_nothing(tmp_path: Path) -> None:
    frame = REFERENCE.head(10).copy()
    index = IdIndex(subjects=set(frame["subject_id"]), admissions=set(), stays=set())
    table, screen = rule_screen(write(tmp_path, frame), CONTRACT, index, None)
    assert table is not None
    with FakeOpenAIServer(lambda _request: "I cannot tell.") as srv:
        judge = CohortJudge("openai/fake-judge", LiteLLMCompletion(api_base=srv.base_url,
                                                                   cache=False))
        judged = judge_cohort(screen, table, STUDY.protocol, judge, seed=3)
    assert (judged.sampled, judged.judge_errors, judged.exclusion_rate) == (10, 10, None)
    assert judged.qualified
