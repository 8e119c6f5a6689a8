"""Answer extractors: which option letter a free-text reply commits to.

The MedAgentsBench paper extracts answers with a second model call: gpt-4o-mini is given the reply
and must return ``{"answer_idx": "<letter>"}`` under a strict JSON schema whose ``enum`` is the
item's option letters (OpenAI ``response_format={"type": "json_schema", ...}``). That is
:func:`llm_extractor`, the default of the paper methods on live runs. :data:`regex_extractor`
(:func:`evaluators.qa.extract_answer`) is the named offline alternative: no call, no cost.

Every :class:`Extraction` says which extractor decided it (``extractor``), so a trace shows, item by
item, whether the letter came from the model extractor, the regex, or the regex after the model
extractor's reply was refused.

Refusals: a reply that is not JSON, has no ``answer_idx``, or names a letter outside the item's
options is *refused* (never trusted, even if a provider ignored the schema); the extraction then
falls back to the regex on the same text and is marked ``regex-fallback`` (the paper retried the
whole item and dropped it after 3 failures; we keep the item and say so). Provider errors
(``openai.APIError``) propagate like any other call's, for the runner to record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import Field

from evaluators.qa import extract_answer
from tasks_lib.domain import Frozen
from tasks_lib.llm import Completion, CompletionFn, Message

DEFAULT_EXTRACTOR_MODEL = "gpt-4o-mini"
"""The paper's extractor model (a method context's ``extractor_model`` overrides it)."""

REGEX = "regex"
REGEX_FALLBACK = "regex-fallback"


class Extraction(Frozen):
    """What an extractor decided for one reply."""

    answer: str | None = Field(description="Option letter, None if none could be extracted.")
    extractor: str = Field(description="Who decided: 'llm:<model>', 'regex', or 'regex-fallback' "
                                       "(the model extractor's reply was refused).")
    thinking: str | None = Field(default=None, description="The extractor's 'thinking' field, "
                                 "when asked for one (the paper's CoT extractor).")
    refused: str | None = Field(default=None, description="Why the model extractor's reply was "
                                "refused (None when it was accepted or not asked).")
    completion: Completion | None = Field(
        default=None, description="The extractor's model call (None for the regex).")


class Extractor(Protocol):
    """Turns a reply into an option letter, with the call layer at hand."""

    name: str

    def __call__(self, text: str, options: Mapping[str, str], complete: CompletionFn
                 ) -> Extraction: ...


@runtime_checkable
class ChatFn(Protocol):
    """A call layer that takes any chat request (``response_format``, tools, …), such as
    :class:`tasks_lib.llm.LiteLLMCompletion`."""

    def chat(self, model: str, messages: Sequence[Mapping[str, Any]], **params: Any
             ) -> Completion: ...


def answer_schema(letters: Sequence[str], thinking: bool = False) -> dict[str, Any]:
    """The paper's ``json_schema`` response format: ``answer_idx`` constrained to ``letters``
    (with a free ``thinking`` string first when ``thinking``)."""
    properties: dict[str, Any] = {}
    if thinking:
        properties["thinking"] = {"type": "string"}
    properties["answer_idx"] = {"type": "string", "enum": list(letters)}
    return {"name": "answer_response", "strict": True,
            "schema": {"type": "object", "properties": properties,
                       "required": list(properties), "additionalProperties": False}}


def extraction_prompt(text: str, letters: Sequence[str], thinking: bool = False) -> str:
    """The paper's extractor instruction (one user message)."""
    shape = ('{"thinking": "<thinking>", "answer_idx": "<option>"}' if thinking
             else '{"answer_idx": "<option>"}')
    return ("You are an answer extractor. Extract the answer option from the text below. "
            f"Only return the answer as a JSON object following this format: {shape}, where "
            + ("<thinking> is the thinking process and " if thinking else "")
            + f"<option> is one of the following: {', '.join(letters)}.\nText:\n{text}")


def parse_extraction(reply: str, letters: Sequence[str]) -> tuple[str | None, str | None, str]:
    """``(answer, thinking, '')`` from an extractor reply, or ``(None, None, reason)`` when the
    reply is refused (not a JSON object, no ``answer_idx``, or a letter outside ``letters``)."""
    try:
        data = json.loads(reply)
    except ValueError:
        return None, None, "reply is not JSON"
    if not isinstance(data, dict) or not isinstance(data.get("answer_idx"), str):
        return None, None, "reply has no answer_idx string"
    letter = data["answer_idx"].strip()
    if letter not in letters:
        return None, None, f"answer_idx {letter!r} is not one of {', '.join(letters)}"
    thinking = data.get("thinking")
    return letter, thinking if isinstance(thinking, str) else None, ""


class LLMExtractor:
    """The paper's extractor: one call to ``model`` with the JSON-schema response format.

    When the call layer is a :class:`ChatFn` the request carries ``response_format`` (OpenAI
    structured outputs); a plain :class:`~tasks_lib.llm.CompletionFn` gets the same instruction
    and its reply is validated the same way. Temperature 0 (the paper left the provider default).

    Args:
        model: litellm model string of the extractor.
        thinking: also ask for a ``thinking`` field (the paper's CoT extractor).
    """

    def __init__(self, model: str = DEFAULT_EXTRACTOR_MODEL, thinking: bool = False) -> None:
        self.model, self.thinking = model, thinking
        self.name = f"llm:{model}"

    def __call__(self, text: str, options: Mapping[str, str], complete: CompletionFn
                 ) -> Extraction:
        letters = list(options)
        prompt = extraction_prompt(text, letters, self.thinking)
        if isinstance(complete, ChatFn):
            reply = complete.chat(
                self.model, [{"role": "user", "content": prompt}], temperature=0.0,
                response_format={"type": "json_schema",
                                 "json_schema": answer_schema(letters, self.thinking)})
        else:
            reply = complete(self.model, [Message(role="user", content=prompt)])
        answer, thinking, refused = parse_extraction(reply.text.strip(), letters)
        if refused:
            return Extraction(answer=regex_pick(text, options), extractor=REGEX_FALLBACK,
                              refused=refused, completion=reply)
        return Extraction(answer=answer, extractor=self.name, thinking=thinking,
                          completion=reply)


class RegexExtractor:
    """The offline extractor: :func:`evaluators.qa.extract_answer`, no model call."""

    name = REGEX

    def __call__(self, text: str, options: Mapping[str, str], complete: CompletionFn
                 ) -> Extraction:
        return Extraction(answer=regex_pick(text, options), extractor=REGEX)


_INDEX = re.compile(r"(?<![\w.])(\d+)(?![\w.])")


def regex_pick(text: str, options: Mapping[str, str]) -> str | None:
    """The regex's letter (:func:`evaluators.qa.extract_answer`), or, when the keys are indices
    ("0", "1", … as in MedPrompt's vote over candidate solutions), the last standalone number that
    is one of them."""
    if options and all(k.isdigit() for k in options):
        found = [n for n in _INDEX.findall(text or "") if n in options]
        return found[-1] if found else None
    return extract_answer(text, options)


def llm_extractor(model: str = DEFAULT_EXTRACTOR_MODEL, thinking: bool = False) -> LLMExtractor:
    """The paper's model extractor (see :class:`LLMExtractor`)."""
    return LLMExtractor(model, thinking)


regex_extractor = RegexExtractor()
"""The offline alternative (no call)."""


def extractor_for(kind: str, model: str = DEFAULT_EXTRACTOR_MODEL, thinking: bool = False
                  ) -> Extractor:
    """``'llm'`` → :func:`llm_extractor` of ``model`` (asking for ``thinking`` too when set);
    ``'regex'`` → :data:`regex_extractor`."""
    if kind == "llm":
        return llm_extractor(model, thinking)
    if kind == REGEX:
        return regex_extractor
    raise ValueError(f"unknown extractor {kind!r} (llm or regex)")


class Review(Frozen):
    """What an extractor read from a Self-Refine review."""

    ok: bool | None = Field(description="The review's verdict: True (the solution stands), False "
                            "(revise), None (none found).")
    explanation: str = Field(description="The feedback handed to the revision.")
    extractor: str = Field(description="Who decided: 'llm:<model>', 'regex', 'regex-fallback'.")
    refused: str | None = Field(default=None, description="Why the model extractor's reply was "
                                "refused (None when accepted or not asked).")
    completion: Completion | None = Field(default=None, description="The extractor's call.")


REVIEW_SCHEMA: dict[str, Any] = {
    "name": "answer_response", "strict": True,
    "schema": {"type": "object",
               "properties": {"explanation": {"type": "string"},
                              "review_result": {"type": "boolean"}},
               "required": ["explanation", "review_result"], "additionalProperties": False}}
"""The paper's Self-Refine review schema (``explanation`` + boolean ``review_result``)."""

_VERDICT = re.compile(r"\b(true|false)\b", re.IGNORECASE)


def regex_review(text: str) -> bool | None:
    """The last standalone True/False of a review (case-insensitive); None if there is none."""
    found = _VERDICT.findall(text or "")
    return found[-1].lower() == "true" if found else None


def review_prompt(text: str) -> str:
    """The review extractor's instruction. The paper's (c5bf425) is garbled by operator
    precedence (the review text never reaches the extractor); this is the well-formed intent."""
    return ("You are an answer extractor. Extract the review result from the text below. Only "
            'return the answer as a JSON object following this format: {"explanation": '
            '"<explanation>", "review_result": <review_result>}, where <explanation> is the '
            "feedback of the review and <review_result> is true if the review returns True (the "
            "solution is correct) and false if it returns False.\nText:\n" + text)


def extract_review(text: str, kind: str, model: str, complete: CompletionFn) -> Review:
    """Self-Refine's review verdict: the paper's JSON-schema model call (``kind='llm'``), the
    regex (``'regex'``), or the regex after a refused reply (``'regex-fallback'``)."""
    if kind == REGEX:
        return Review(ok=regex_review(text), explanation=text, extractor=REGEX)
    if kind != "llm":
        raise ValueError(f"unknown extractor {kind!r} (llm or regex)")
    prompt = review_prompt(text)
    if isinstance(complete, ChatFn):
        reply = complete.chat(model, [{"role": "user", "content": prompt}], temperature=0.0,
                              response_format={"type": "json_schema", "json_schema": REVIEW_SCHEMA})
    else:
        reply = complete(model, [Message(role="user", content=prompt)])
    try:
        data = json.loads(reply.text.strip())
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("review_result"), bool):
        explanation = data.get("explanation")
        return Review(ok=data["review_result"],
                      explanation=explanation if isinstance(explanation, str) else text,
                      extractor=f"llm:{model}", completion=reply)
    return Review(ok=regex_review(text), explanation=text, extractor=REGEX_FALLBACK,
                  refused="reply has no boolean review_result", completion=reply)
