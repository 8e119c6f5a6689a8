"""Our variants of the reasoning methods: the methods as medflows first had them (regex answers,
no extractor call), under their own names (``cot_sc_vote``, ``self_refine_stable``,
``multi_persona_panel``, ``medprompt_shuffle``; :mod:`tasks_lib.qa.methods` describes them and
imports this module, so every method is registered in one place)."""

from __future__ import annotations

import random

from evaluators.qa import extract_answer
from tasks_lib.llm import CompletionFn
from tasks_lib.qa.method_base import (
    COT,
    EXPERT,
    METHODS,
    CallTally,
    MethodContext,
    MethodResult,
    format_item,
    majority,
)
from tasks_lib.qa.types import PublicQAItem


@METHODS.register("cot_sc_vote")
def cot_sc_vote(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
           ) -> MethodResult:
    """Self-consistency: ``ctx.samples`` sampled CoT replies, majority vote."""
    t = CallTally(model, complete)
    prompt = format_item(item.question, item.options)
    raws = t.ask_all([(f"{EXPERT} {COT}", prompt, ctx.sample_temperature)] * ctx.samples)
    votes = [extract_answer(r, item.options) for r in raws]
    answer = majority(votes)
    raw = next((r for r, v in zip(raws, votes, strict=True) if v == answer), raws[-1])
    return t.result(answer, raw)


@METHODS.register("self_refine_stable")
def self_refine_stable(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext,
                rounds: int = 3) -> MethodResult:
    """CoT answer, then up to ``rounds`` feedback→refine rounds; stops when the answer is stable."""
    t = CallTally(model, complete)
    prompt = format_item(item.question, item.options)
    raw = t.ask(f"{EXPERT} {COT}", prompt)
    answer = extract_answer(raw, item.options)
    for _ in range(rounds):
        feedback = t.ask(
            "You are a meticulous medical examiner. Point out errors in the reasoning below.",
            f"{prompt}\n\nProposed solution:\n{raw}",
        )
        refined = t.ask(
            f"{EXPERT} Improve the solution using the feedback. {COT}",
            f"{prompt}\n\nPrevious solution:\n{raw}\n\nFeedback:\n{feedback}",
        )
        new_answer = extract_answer(refined, item.options)
        raw, stable = refined, new_answer == answer
        answer = new_answer
        if stable:
            break
    return t.result(answer, raw)


PERSONAS = ("an internal medicine physician", "a clinical pharmacologist", "a medical educator")


@METHODS.register("multi_persona_panel")
def multi_persona_panel(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
                  ) -> MethodResult:
    """Three personas answer, see each other's answers for a second round, a moderator decides."""
    t = CallTally(model, complete)
    prompt = format_item(item.question, item.options)
    views = t.ask_all([(f"You are {p}. {COT}", prompt, 0.0) for p in PERSONAS])
    for _ in range(1):
        board = "\n\n".join(f"{p}:\n{v}" for p, v in zip(PERSONAS, views, strict=True))
        views = t.ask_all([
            (f"You are {p}. Reconsider your answer given your colleagues' views. {COT}",
             f"{prompt}\n\nColleagues' answers:\n{board}", 0.0)
            for p in PERSONAS
        ])
    board = "\n\n".join(f"{p}:\n{v}" for p, v in zip(PERSONAS, views, strict=True))
    raw = t.ask(f"You moderate a panel of medical experts. Decide the final answer. {COT}",
                f"{prompt}\n\nPanel's final answers:\n{board}")
    return t.result(extract_answer(raw, item.options), raw)


def _shuffled(options: dict[str, str], rng: random.Random) -> tuple[dict[str, str], dict[str, str]]:
    """Options in a shuffled order under the same letters, and new letter → original letter."""
    letters = list(options)
    order = letters[:]
    rng.shuffle(order)
    shown = {new: options[old] for new, old in zip(letters, order, strict=True)}
    back = dict(zip(letters, order, strict=True))
    return shown, back


@METHODS.register("medprompt_shuffle")
def medprompt_shuffle(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext,
              generations: int = 3) -> MethodResult:
    """Medprompt choice-shuffle ensemble: CoT on ``generations`` seeded option orders, vote."""
    t = CallTally(model, complete)
    rng = random.Random(f"{ctx.seed}:{item.dataset}:{item.realidx}")
    orders = [_shuffled(item.options, rng) for _ in range(generations)]
    raws = t.ask_all([(f"{EXPERT} {COT}", format_item(item.question, shown), 0.0)
                      for shown, _ in orders])
    votes: list[str | None] = []
    for raw, (shown, back) in zip(raws, orders, strict=True):
        letter = extract_answer(raw, shown)
        votes.append(back[letter] if letter else None)
    answer = majority(votes)
    raw = next((r for r, v in zip(raws, votes, strict=True) if v == answer), raws[-1])
    return t.result(answer, raw)

