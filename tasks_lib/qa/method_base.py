"""What every QA reasoning method shares: its context and result, the call tally, the registry.

The single-model methods (:mod:`tasks_lib.qa.methods`) and the paper's multi-agent methods
(:mod:`tasks_lib.qa.medagents`, :mod:`tasks_lib.qa.mdagents`) all build on this module, so none of
them imports another; :mod:`tasks_lib.qa.methods` imports the multi-agent ones, so importing it
fills :data:`METHODS` with every method.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from evaluators.registry import Registry
from tasks_lib.domain import Frozen
from tasks_lib.llm import Completion, CompletionFn, Message
from tasks_lib.llm_scope import gather
from tasks_lib.qa.extractor import ChatFn, Extraction, Review, extract_review, extractor_for
from tasks_lib.qa.types import Exemplar, PublicQAItem


class MethodContext(Frozen):
    """What a method may use besides the item."""

    exemplars: list[Exemplar] = Field(default_factory=list, description="Few-shot exemplars.")
    seed: int = Field(default=0, description="Seed for shuffles and sampling.")
    samples: int = Field(default=5, ge=1, description="Samples for self-consistency.")
    sample_temperature: float = Field(default=0.7, description="Temperature of sampled calls.")
    extractor: Literal["llm", "regex"] = Field(
        default="llm", description="Answer extractor of the paper methods (every method but the "
        "variants and medagents): 'llm' (the paper's JSON-schema model call) or 'regex' "
        "(offline, no call).")
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


EXPERT = "You are a medical expert answering a multiple-choice exam question."
COT = "Think step by step, then finish with a line 'The answer is (X)' where X is the letter."


def format_item(question: str, options: dict[str, str]) -> str:
    """Question followed by one ``X. text`` line per option."""
    return question + "\n\n" + "\n".join(f"{k}. {v}" for k, v in options.items())


def majority(votes: Sequence[str | None]) -> str | None:
    """Most frequent non-None vote; ties go to the vote seen first."""
    counted = Counter(v for v in votes if v is not None)
    if not counted:
        return None
    best = max(counted.values())
    return next(v for v in votes if v is not None and counted[v] == best)


Method = Callable[[PublicQAItem, str, CompletionFn, MethodContext], MethodResult]
METHODS: Registry[Method] = Registry("method")


PAPER_SEED = 42
"""The seed the paper sent with every call of a non-reasoning model."""
REASONING_MODEL = re.compile(r"(?:^|/)(?:o\d(?:-mini|-preview)?(?:$|-)|deepseek-r1|qwq)",
                             re.IGNORECASE)
"""Reasoning models (o1/o3/o4…, DeepSeek-R1, QwQ): the paper sent them neither temperature nor seed
and no system role."""
NO_SEED_MODEL = re.compile(r"claude|anthropic", re.IGNORECASE)
"""Models the paper called at temperature 0 without a seed (Anthropic has none) and, like the
reasoning models, without a system role."""


def paper_params(model: str) -> dict[str, Any]:
    """The sampling parameters the paper sent ``model``: temperature 0 and seed 42, temperature 0
    only (Claude), nothing (reasoning models)."""
    if REASONING_MODEL.search(model):
        return {}
    if NO_SEED_MODEL.search(model):
        return {"temperature": 0.0}
    return {"temperature": 0.0, "seed": PAPER_SEED}


class CallTally:
    """Accumulates usage over the calls of one method invocation."""

    def __init__(self, model: str, complete: CompletionFn) -> None:
        self.model, self.complete = model, complete
        self.calls: list[Completion] = []
        self.extractor_calls: list[Completion] = []

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

    def say(self, user: str, system: str | None = None) -> str:
        """One call as the paper made it: an optional system message and the user message, with
        :func:`paper_params` (seed 42 travels only through a call layer that takes any chat
        parameter, :class:`~tasks_lib.qa.extractor.ChatFn`; a plain completion function gets the
        messages and the temperature)."""
        params = paper_params(self.model)
        if system and (REASONING_MODEL.search(self.model) or NO_SEED_MODEL.search(self.model)):
            system, user = None, f"{system} {user}"  # the paper sent these a user message only
        messages = [Message(role="system", content=system)] if system else []
        messages.append(Message(role="user", content=user))
        if isinstance(self.complete, ChatFn):
            reply = self.complete.chat(self.model, [m.model_dump() for m in messages], **params)
        else:
            reply = self.complete(self.model, messages,
                                  temperature=float(params.get("temperature", 0.0)))
        self.calls.append(reply)
        return reply.text

    def extract(self, text: str, options: Mapping[str, str], ctx: MethodContext,
                thinking: bool = False) -> Extraction:
        """The answer extractor of ``ctx`` over ``options`` (its call, if any, is counted)."""
        found = extractor_for(ctx.extractor, ctx.extractor_model, thinking)(text, options,
                                                                          self.complete)
        if found.completion is not None:
            self.calls.append(found.completion)
            self.extractor_calls.append(found.completion)
        return found

    def review(self, text: str, ctx: MethodContext) -> Review:
        """Self-Refine's review verdict through the extractor of ``ctx`` (counted)."""
        found = extract_review(text, ctx.extractor, ctx.extractor_model, self.complete)
        if found.completion is not None:
            self.calls.append(found.completion)
            self.extractor_calls.append(found.completion)
        return found

    def result(self, answer: str | None, raw: str) -> MethodResult:
        return MethodResult(
            answer=answer, raw=raw, calls=len(self.calls),
            prompt_tokens=sum(c.prompt_tokens for c in self.calls),
            completion_tokens=sum(c.completion_tokens for c in self.calls),
            latency_s=sum(c.latency_s for c in self.calls),
        )

    def finish(self, found: Extraction, raw: str, trace: dict[str, str] | None = None
               ) -> MethodResult:
        """The result of an extracted answer: who decided it, the extractor's share of the
        usage, and ``trace`` (plus why a refused extractor reply was refused)."""
        mine = self.extractor_calls
        refused = {"extractor_refused": found.refused} if found.refused else {}
        return self.result(found.answer, raw).model_copy(update={
            "extractor": found.extractor, "extractor_calls": len(mine),
            "extractor_prompt_tokens": sum(c.prompt_tokens for c in mine),
            "extractor_completion_tokens": sum(c.completion_tokens for c in mine),
            "trace": {**(trace or {}), **refused},
        })
