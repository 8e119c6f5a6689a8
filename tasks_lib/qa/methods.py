"""Reasoning methods for multiple-choice QA agents (MedAgentsBench). An agent = (model, method).

Every method is a function ``(item, model, complete, ctx) -> MethodResult`` registered in
:data:`METHODS`; they differ only in how they prompt and aggregate. All calls go through a
:class:`~tasks_lib.llm.CompletionFn`, so usage is counted the same way for each. Calls that do not
depend on each other (cot_sc's samples, medprompt's generations, one round of a panel) are asked
concurrently with :func:`tasks_lib.llm.gather`; dependent calls (self-refine rounds) stay in order.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import Field

from evaluators.qa import extract_answer
from evaluators.registry import Registry
from tasks_lib.domain import Frozen
from tasks_lib.llm import Completion, CompletionFn, Message, gather
from tasks_lib.qa.types import Exemplar, PublicQAItem

EXPERT = "You are a medical expert answering a multiple-choice exam question."
LETTER_ONLY = "Reply with the letter of the single best option only."
COT = "Think step by step, then finish with a line 'The answer is (X)' where X is the letter."


class MethodContext(Frozen):
    """What a method may use besides the item."""

    exemplars: list[Exemplar] = Field(default_factory=list, description="Few-shot exemplars.")
    seed: int = Field(default=0, description="Seed for shuffles and sampling.")
    samples: int = Field(default=5, ge=1, description="Samples for self-consistency.")
    sample_temperature: float = Field(default=0.7, description="Temperature of sampled calls.")
    extractor: Literal["llm", "regex"] = Field(
        default="llm", description="Answer extractor of the paper methods (medagents, mdagents): "
        "'llm' (the paper's JSON-schema model call) or 'regex' (offline, no call).")
    extractor_model: str = Field(default="gpt-4o-mini",
                                 description="litellm model string of the 'llm' extractor.")


class MethodResult(Frozen):
    """A method's answer and what it cost."""

    answer: str | None = Field(description="Extracted option letter, None if none.")
    raw: str = Field(description="Final raw model text the answer came from.")
    calls: int = Field(description="Model calls made.")
    prompt_tokens: int = Field(description="Input tokens over all calls.")
    completion_tokens: int = Field(description="Output tokens over all calls.")
    latency_s: float = Field(description="Wall time over all calls.")
    extractor: str | None = Field(
        default=None, description="Who decided the answer: 'llm:<model>', 'regex', "
        "'regex-fallback', 'option-regex' (MedAgents' 'Option: X'); None = the method's regex.")
    extractor_calls: int = Field(default=0, description="Of `calls`, those made by the answer "
                                 "extractor's model (priced at that model, not the agent's).")
    extractor_prompt_tokens: int = Field(default=0, description="Of `prompt_tokens`, the "
                                         "extractor's.")
    extractor_completion_tokens: int = Field(default=0, description="Of `completion_tokens`, "
                                             "the extractor's.")
    trace: dict[str, str] = Field(default_factory=dict, description="Method-specific facts for "
                                  "the trace (e.g. MDAgents' route).")


Method = Callable[[PublicQAItem, str, CompletionFn, MethodContext], MethodResult]
METHODS: Registry[Method] = Registry("method")


def format_item(question: str, options: dict[str, str]) -> str:
    """Question followed by one ``X. text`` line per option."""
    return question + "\n\n" + "\n".join(f"{k}. {v}" for k, v in options.items())


class _Tally:
    """Accumulates usage over the calls of one method invocation."""

    def __init__(self, model: str, complete: CompletionFn) -> None:
        self.model, self.complete = model, complete
        self.calls: list[Completion] = []

    def ask(self, system: str, user: str, temperature: float = 0.0) -> str:
        reply = self.complete(
            self.model,
            [Message(role="system", content=system), Message(role="user", content=user)],
            temperature=temperature,
        )
        self.calls.append(reply)
        return reply.text

    def ask_all(self, prompts: Sequence[tuple[str, str, float]]) -> list[str]:
        """Independent ``(system, user, temperature)`` calls, asked concurrently, in order."""
        return gather([functools.partial(self.ask, *p) for p in prompts])

    def result(self, answer: str | None, raw: str) -> MethodResult:
        return MethodResult(
            answer=answer, raw=raw, calls=len(self.calls),
            prompt_tokens=sum(c.prompt_tokens for c in self.calls),
            completion_tokens=sum(c.completion_tokens for c in self.calls),
            latency_s=sum(c.latency_s for c in self.calls),
        )


def majority(votes: Sequence[str | None]) -> str | None:
    """Most frequent non-None vote; ties go to the vote seen first."""
    counted = Counter(v for v in votes if v is not None)
    if not counted:
        return None
    best = max(counted.values())
    return next(v for v in votes if v is not None and counted[v] == best)


@METHODS.register("zero_shot")
def zero_shot(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
              ) -> MethodResult:
    """One call, letter only."""
    t = _Tally(model, complete)
    raw = t.ask(f"{EXPERT} {LETTER_ONLY}", format_item(item.question, item.options))
    return t.result(extract_answer(raw, item.options), raw)


@METHODS.register("few_shot")
def few_shot(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
             ) -> MethodResult:
    """Zero-shot preceded by the dataset's exemplars (first 5 train items)."""
    shots = "\n\n".join(
        f"{format_item(e.question, e.options)}\nAnswer: {e.answer_idx}" for e in ctx.exemplars
    )
    t = _Tally(model, complete)
    user = f"{shots}\n\n{format_item(item.question, item.options)}\nAnswer:"
    raw = t.ask(f"{EXPERT} {LETTER_ONLY}", user.strip())
    return t.result(extract_answer(raw, item.options), raw)


@METHODS.register("cot")
def cot(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
        ) -> MethodResult:
    """Chain of thought, one call."""
    t = _Tally(model, complete)
    raw = t.ask(f"{EXPERT} {COT}", format_item(item.question, item.options))
    return t.result(extract_answer(raw, item.options), raw)


@METHODS.register("cot_sc")
def cot_sc(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
           ) -> MethodResult:
    """Self-consistency: ``ctx.samples`` sampled CoT replies, majority vote."""
    t = _Tally(model, complete)
    prompt = format_item(item.question, item.options)
    raws = t.ask_all([(f"{EXPERT} {COT}", prompt, ctx.sample_temperature)] * ctx.samples)
    votes = [extract_answer(r, item.options) for r in raws]
    answer = majority(votes)
    raw = next((r for r, v in zip(raws, votes, strict=True) if v == answer), raws[-1])
    return t.result(answer, raw)


@METHODS.register("self_refine")
def self_refine(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext,
                rounds: int = 3) -> MethodResult:
    """CoT answer, then up to ``rounds`` feedback→refine rounds; stops when the answer is stable."""
    t = _Tally(model, complete)
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


@METHODS.register("multi_persona")
def multi_persona(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext
                  ) -> MethodResult:
    """Three personas answer, see each other's answers for a second round, a moderator decides."""
    t = _Tally(model, complete)
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


@METHODS.register("medprompt")
def medprompt(item: PublicQAItem, model: str, complete: CompletionFn, ctx: MethodContext,
              generations: int = 3) -> MethodResult:
    """Medprompt choice-shuffle ensemble: CoT on ``generations`` seeded option orders, vote."""
    t = _Tally(model, complete)
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


# The paper's multi-agent methods register themselves in METHODS on import; importing them here
# (after everything they use is defined) registers them wherever METHODS is used.
import tasks_lib.qa.mdagents  # noqa: E402
import tasks_lib.qa.medagents  # noqa: E402, F401
