"""Fake completion functions for QA tests (deterministic, no network)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tasks_lib.llm import Completion, Message
from tasks_lib.qa.meld import split_at_middle_token
from tasks_lib.qa.types import QAItem


class MemorisingModel:
    """Recites the true continuation for memorised questions, paraphrases the rest."""

    def __init__(self, memorised: Sequence[QAItem]) -> None:
        self.halves = {split_at_middle_token(it.question)[0]: split_at_middle_token(it.question)[1]
                       for it in memorised}
        self.calls: list[tuple[str, int | None]] = []

    def __call__(self, model: str, messages: Sequence[Message], *, max_tokens: int | None = None,
                 temperature: float = 0.0) -> Completion:
        prefix = messages[-1].content
        self.calls.append((model, max_tokens))
        text = self.halves.get(prefix, " which of the following is the most likely diagnosis?")
        return Completion(text=text, prompt_tokens=len(prefix.split()),
                          completion_tokens=len(text.split()), latency_s=0.0)


class ScriptedModel:
    """Answers with a function of the prompt; records every call."""

    def __init__(self, answer: str = "The answer is (B).") -> None:
        self.answer = answer
        self.calls: list[list[Message]] = []

    def __call__(self, model: str, messages: Sequence[Message], *, max_tokens: int | None = None,
                 temperature: float = 0.0) -> Completion:
        self.calls.append(list(messages))
        return Completion(text=self.reply(list(messages)), prompt_tokens=10,
                          completion_tokens=5, latency_s=0.01)

    def reply(self, messages: list[Message]) -> str:
        return self.answer


class TextAnswerModel(ScriptedModel):
    """Always picks the option whose text is 'Heparin', wherever it is listed."""

    def reply(self, messages: list[Message]) -> str:
        match = re.search(r"^([A-Z])\. Heparin$", messages[-1].content, re.MULTILINE)
        return f"The answer is ({match.group(1) if match else 'A'})."
