"""MedBench rubric judge calls through the one call layer (:mod:`tasks_lib.llm`).

One call per (item, dimension) at temperature 0 (cached by the call layer on prompt, model and
parameters, so the rubric version, item and answer are all part of the key); an unreadable reply
is re-asked twice in the same conversation, then recorded as ``judge_error`` with no value. A
provider failure after the call layer's retries is recorded the same way (data, never a 0).
The ``rules`` judge model answers offline without any request; an empty answer scores 0 on every
dimension without a call.
"""

from __future__ import annotations

from pydantic import Field

from evaluators.judges.medbench import (
    REASK,
    RULES_JUDGE,
    JudgeCase,
    Rubric,
    build_prompt,
    item_value,
    parse_score,
    rules_reply,
)
from tasks_lib.domain import Frozen
from tasks_lib.llm import CompletionFn, LiteLLMCompletion, Message
from tasks_lib.llm_scope import parallel_map
from tasks_lib.redaction import redact
from tasks_lib.settings import get_settings

REASKS = 2
"""Re-asks after an unreadable reply (spec §4.6)."""


class Judgement(Frozen):
    """The judge's verdict on one item (all dimensions)."""

    item_id: str = Field(description="Evaluation item id.")
    rubric_id: str = Field(description="Rubric used.")
    rubric_version: str = Field(description="Its version.")
    judge_model: str = Field(description="Judge model ('rules' = offline).")
    scores: dict[str, int] = Field(default_factory=dict, description="Dimension → 0–5.")
    value: float | None = Field(default=None, description="Weighted score / 5 (None = error).")
    calls: int = Field(default=0, description="Model calls made (re-asks included).")
    error: str | None = Field(default=None, description="Why no value (judge_error).")


def _ask(completion: CompletionFn, model: str, prompt: str) -> tuple[int | None, int, str]:
    """Score of one prompt after up to :data:`REASKS` re-asks: (score, calls, last reply)."""
    messages = [Message(role="user", content=prompt)]
    reply = ""
    for attempt in range(REASKS + 1):
        reply = completion(model, messages, max_tokens=512, temperature=0.0).text
        score = parse_score(reply)
        if score is not None:
            return score, attempt + 1, reply
        messages = [*messages, Message(role="assistant", content=reply),
                    Message(role="user", content=REASK)]
    return None, REASKS + 1, reply


def judge_case(case: JudgeCase, rubric: Rubric, model: str, completion: CompletionFn | None,
               weights: dict[str, float] | None = None) -> Judgement:
    """Judge one item on every rubric dimension."""
    import openai

    base = {"item_id": case.item_id, "rubric_id": rubric.id, "rubric_version": rubric.version,
            "judge_model": model}
    scores: dict[str, int] = {}
    calls = 0
    if not case.answer.strip():  # nothing to judge: 0 on every dimension, no call
        scores = dict.fromkeys(rubric.dimensions, 0)
        return Judgement(**base, scores=scores, value=item_value(scores, rubric, weights))
    for dimension in rubric.dimensions:
        if model == RULES_JUDGE:
            score, n, reply = parse_score(rules_reply(case)), 0, ""
        else:
            assert completion is not None
            try:
                score, n, reply = _ask(completion, model, build_prompt(rubric, dimension, case))
            except openai.APIError as exc:
                return Judgement(**base, calls=calls + 1,
                                 error=redact(f"judge_error: provider failed: {exc}")[:300])
        calls += n
        if score is None:
            return Judgement(**base, calls=calls, error=f"judge_error: no <score>0-5</score> "
                                                        f"for {dimension} after {REASKS} "
                                                        f"re-asks: {reply[:120]!r}")
        scores[dimension] = score
    return Judgement(**base, scores=scores, value=item_value(scores, rubric, weights),
                     calls=calls)


def judge_cases(cases: list[JudgeCase], rubric: Rubric, model: str | None = None,
                completion: CompletionFn | None = None,
                weights: dict[str, float] | None = None) -> list[Judgement]:
    """Judge items concurrently (bounded by the endpoint's connection limit)."""
    model = model or get_settings().judge_model
    if model != RULES_JUDGE and completion is None:
        completion = LiteLLMCompletion()
    workers = 1 if model == RULES_JUDGE else get_settings().max_connections
    return parallel_map(lambda c: judge_case(c, rubric, model, completion, weights), cases,
                        workers)
