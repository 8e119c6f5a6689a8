"""Reasoning methods: call budgets (the paper's methods and our variants), voting, option
shuffling, and the real litellm path."""

from __future__ import annotations

import time

import pytest
from support.openai_server import FakeOpenAIServer, Transient
from support.qa_fakes import ScriptedModel, TextAnswerModel

from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.llm import Completion, LiteLLMCompletion, Message
from tasks_lib.llm_scope import current_branch
from tasks_lib.pricing import price_snapshot
from tasks_lib.qa.method_base import MethodContext
from tasks_lib.qa.methods import METHODS, majority
from tasks_lib.qa.runner import run_agent, total_cost
from tasks_lib.qa.types import Exemplar, PublicQAItem

ITEM = PublicQAItem(dataset="medqa", realidx="1",
                    question="Which anticoagulant acts on antithrombin?",
                    options={"A": "Aspirin", "B": "Heparin", "C": "Warfarin", "D": "Clopidogrel"})


@pytest.mark.parametrize(
    ("method", "calls", "extractor_calls"),
    [("zero_shot", 1, 1), ("few_shot", 1, 1), ("cot", 1, 1), ("cot_sc", 6, 6),
     ("multi_persona", 7, 7), ("medprompt", 6, 4),
     # no review verdict the extractor can read counts as False: 3 review/revise rounds
     ("self_refine", 7, 8),
     # the variants: regex answers, no extractor call
     ("cot_sc_vote", 5, 0), ("multi_persona_panel", 7, 0), ("medprompt_shuffle", 3, 0),
     ("self_refine_stable", 3, 0)],
)
def test_call_budgets_and_answer(method: str, calls: int, extractor_calls: int) -> None:
    """On a plain completion function the LLM extractor's replies are not JSON: each is refused
    and the regex decides on the same text ('regex-fallback'); its calls are still counted."""
    model = ScriptedModel("Step by step... The answer is (B).")
    result = METHODS.get(method)(ITEM, "m", model, MethodContext())
    total = calls + extractor_calls
    assert result.calls == total == len(model.calls)
    assert result.extractor_calls == extractor_calls
    assert result.prompt_tokens == 10 * total and result.completion_tokens == 5 * total
    assert result.extractor_prompt_tokens == 10 * extractor_calls
    assert result.extractor == ("regex-fallback" if extractor_calls else None)
    if method != "medprompt_shuffle":
        assert result.answer == "B"
    regex = METHODS.get(method)(ITEM, "m", ScriptedModel("The answer is (B)."),
                                MethodContext(extractor="regex"))
    assert regex.calls == calls  # the regex extractor: the same model calls, no extractor call
    if extractor_calls:
        assert (regex.extractor, regex.extractor_calls) == ("regex", 0)


def test_self_refine_with_the_regex_reads_the_review_verdict() -> None:
    class Reviewer(ScriptedModel):
        def reply(self, messages: list[Message]) -> str:
            if "critically evaluate" in messages[-1].content:
                return "Checked every step: True."
            return "The answer is (C)."

    result = METHODS.get("self_refine")(ITEM, "m", Reviewer(), MethodContext(extractor="regex"))
    assert (result.calls, result.answer, result.trace) == (2, "C", {"reviews": "True"})


def test_self_refine_stable_stops_after_three_rounds_when_unstable() -> None:
    answers = iter(["The answer is (A)", "fb", "The answer is (B)", "fb", "The answer is (C)",
                    "fb", "The answer is (D)"])

    class Flipping(ScriptedModel):
        def reply(self, messages: list[Message]) -> str:
            return next(answers)

    result = METHODS.get("self_refine_stable")(ITEM, "m", Flipping(), MethodContext())
    assert result.calls == 7 and result.answer == "D"


def test_self_refine_stable_stops_when_the_answer_is_stable() -> None:
    model = ScriptedModel("The answer is (B).")
    result = METHODS.get("self_refine_stable")(ITEM, "m", model, MethodContext())
    assert result.calls == 3 and "meticulous medical examiner" in model.calls[1][0].content


def test_medprompt_shuffle_maps_shuffled_letters_back() -> None:
    model = TextAnswerModel()
    result = METHODS.get("medprompt_shuffle")(ITEM, "m", model, MethodContext(seed=1))
    assert result.answer == "B" and result.calls == 3
    shown = {tuple(line[3:] for line in c[-1].content.splitlines()[2:]) for c in model.calls}
    assert len(shown) > 1  # the options really were shown in different orders


def test_multi_persona_panel_shows_full_replies_and_a_moderator_decides() -> None:
    model = ScriptedModel("Panel reasoning. The answer is (B).")
    result = METHODS.get("multi_persona_panel")(ITEM, "m", model, MethodContext())
    assert result.calls == 7 and result.answer == "B"
    assert "Colleagues' answers" in model.calls[3][-1].content
    assert "Panel reasoning" in model.calls[3][-1].content  # the whole reply, not extracted
    assert model.calls[-1][0].content.startswith("You moderate a panel")


def test_few_shot_puts_exemplars_in_the_prompt() -> None:
    model = ScriptedModel("B")
    ex = [Exemplar(dataset="medqa", question="Q-ex", options={"A": "x", "B": "y"}, answer_idx="A")]
    METHODS.get("few_shot")(ITEM, "m", model, MethodContext(exemplars=ex, extractor="regex"))
    assert "Q-ex" in model.calls[0][-1].content and "Answer: x" in model.calls[0][-1].content


def test_majority_vote_ties_go_to_first_seen() -> None:
    assert majority(["C", "B", "B", "C", None]) == "C"
    assert majority([None, None]) is None


def test_cot_sc_vote_majority_over_samples() -> None:
    """Samples are asked concurrently; sample i (its gather branch) answers replies[i], so the
    first-seen tie-break (A and C twice each) is decided by sample order, not thread timing."""
    replies = ["answer: A", "answer: C", "answer: C", "no idea", "answer: A"]

    class Varied(ScriptedModel):
        def reply(self, messages: list[Message]) -> str:
            time.sleep(0.01 * (5 - current_branch()[0]))  # the first sample finishes last
            return replies[current_branch()[0]]

    for _ in range(3):
        result = METHODS.get("cot_sc_vote")(ITEM, "m", Varied(), MethodContext())
        assert result.answer == "A" and result.calls == 5 and result.raw == "answer: A"


def test_litellm_path_against_local_server_with_retry() -> None:
    seen = {"n": 0}

    def responder(body: dict) -> str:  # type: ignore[type-arg]
        seen["n"] += 1
        if seen["n"] == 1:
            raise Transient
        assert body["temperature"] == 0.0
        return "Heparin potentiates antithrombin. The answer is (B)."

    with FakeOpenAIServer(responder) as srv:
        agent = AgentSpec(agent_id="fake@cot", harness=Harness.QA_METHOD, model="openai/fake",
                          method="cot", params={"api_base": srv.base_url, "extractor": "regex"})
        answers = run_agent(agent, [ITEM], {}, price_snapshot()).answers
    assert seen["n"] == 2
    assert answers[0].answer == "B" and "antithrombin" in (answers[0].raw or "")
    assert answers[0].prompt_tokens and answers[0].cost_usd is None  # unknown model: cost null
    assert total_cost(answers) is None


def test_known_model_cost_from_price_snapshot() -> None:
    snap = price_snapshot()
    assert snap.cost("gpt-4o", 1_000_000, 1_000_000) == pytest.approx(12.5)
    assert snap.cost("unknown-model", 10, 10) is None


def test_completion_reports_truncation() -> None:
    with FakeOpenAIServer(lambda body: {"content": "The answer", "finish_reason": "length"}) as s:
        reply = LiteLLMCompletion(api_base=s.base_url)("openai/x", [Message(role="user",
                                                                           content="hi")])
    assert isinstance(reply, Completion) and reply.truncated
