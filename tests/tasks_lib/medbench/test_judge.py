"""MedBench judge calls through the call layer against the local OpenAI-compatible server."""

from __future__ import annotations

import re
from typing import Any

from support.openai_server import FakeOpenAIServer

from evaluators.judges.medbench import JudgeCase, load_rubric
from tasks_lib.llm import LiteLLMCompletion
from tasks_lib.medbench.judge import judge_cases

SCORES = {"correctness": "4", "professionalism": "5", "safety": "3", "usability": "4"}


def _case(i: int) -> JudgeCase:
    return JudgeCase(item_id=f"t/{i}", question="q", answer=f"answer {i}", gold="g",
                     key_points=["k"])


def _responder(body: dict[str, Any]) -> str:
    prompt = body["messages"][0]["content"]
    dim = re.search(r"Score only this dimension: (\w+)", prompt)
    assert dim is not None
    item = re.search(r"Task ID: (\S+)", prompt)
    assert item is not None
    if item.group(1) == "t/bad":
        return "<score>4.5</score>"  # never readable: re-asked twice, then judge_error
    if item.group(1) == "t/late" and len(body["messages"]) == 1:
        return "I think it is a four."  # readable after one re-ask
    return f"Because...\nTask ID: {item.group(1)}\n<score>{SCORES[dim.group(1)]}</score>"


def test_judge_per_dimension_weights_reasks_and_errors() -> None:
    cases = [_case(1), _case(2), JudgeCase(item_id="t/bad", question="q", answer="a", gold="g"),
             JudgeCase(item_id="t/late", question="q", answer="a", gold="g")]
    with FakeOpenAIServer(_responder) as srv:
        completion = LiteLLMCompletion(api_base=srv.base_url, cache=False, retries=0)
        out = judge_cases(cases, load_rubric("medication"), "openai/judge", completion)
        requests = list(srv.requests)
    by_id = {j.item_id: j for j in out}
    good = by_id["t/1"]
    assert good.scores == {"correctness": 4, "professionalism": 5, "safety": 3, "usability": 4}
    assert abs(100 * good.value - 76.6667) < 1e-3 if good.value is not None else False
    assert good.calls == 4 and good.rubric_version == "medication-1"
    bad = by_id["t/bad"]
    assert bad.value is None and bad.scores == {} and bad.calls == 3
    assert bad.error is not None and bad.error.startswith("judge_error")
    late = by_id["t/late"]
    assert late.value is not None and late.calls == 8  # one re-ask per dimension
    assert all(r["temperature"] == 0.0 for r in requests)
    assert len(requests) == 4 + 4 + 3 + 8


def test_rules_judge_makes_no_request() -> None:
    out = judge_cases([_case(1)], load_rubric("general_qa"), "rules")
    assert out[0].value == 0.0 and out[0].calls == 0 and out[0].error is None


def test_empty_answer_scores_zero_without_a_call() -> None:
    empty = JudgeCase(item_id="t/e", question="q", answer="  ", gold="g", key_points=["k"])
    out = judge_cases([empty], load_rubric("general_qa"), "openai/never-called",
                      completion=None)
    assert out[0].value == 0.0 and out[0].calls == 0 and out[0].error is None
