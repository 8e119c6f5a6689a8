"""Policies decide each turn of the loop: a model through the call layer, or a scripted agent
(offline).

A new harness implements :class:`Policy`; the loop in :mod:`tasks_lib.harness.loop` is shared.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Protocol

from tasks_lib.harness.messages import TOOLS, AgentTurn, ChatMessage, ToolCall, ToolName
from tasks_lib.llm import LiteLLMCompletion
from tasks_lib.llm_scope import call_scope


class Policy(Protocol):
    """Produces the next assistant turn from the conversation so far."""

    model: str

    def next_turn(self, messages: Sequence[ChatMessage]) -> AgentTurn:
        """The assistant's reply (text and/or tool calls)."""
        ...


class LiteLLMPolicy:
    """A tool-calling model through the call layer (:class:`tasks_lib.llm.LiteLLMCompletion`:
    connection and rate limits, retries, the call cache); temperature 0 by default.

    Args:
        model: litellm model string.
        api_base: OpenAI-compatible endpoint (default: the ``llm_api_base`` setting).
        temperature: sampling temperature.
        max_tokens: output cap per turn (a reply hitting it is marked truncated).
        retries: retries with exponential backoff on transient provider errors.
        base_delay: first backoff delay in seconds.
        salt: what makes this run's calls distinct from an otherwise identical run's in the call
            cache (its replicate), so replicates never share replies.
        door: the call layer instance (default: one for ``api_base``).
        tools: tool schemas sent with every call (default: execute_code and submit_results;
            RWE runs send theirs).
    """

    def __init__(self, model: str, api_base: str | None = None, temperature: float = 0.0,
                 max_tokens: int = 4096, retries: int = 4, base_delay: float = 1.0,
                 salt: str = "", door: LiteLLMCompletion | None = None,
                 tools: list[dict[str, Any]] | None = None) -> None:
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.salt, self.tools = salt, tools or TOOLS
        self.door = door or LiteLLMCompletion(api_base=api_base, retries=retries,
                                              base_delay=base_delay)

    def next_turn(self, messages: Sequence[ChatMessage]) -> AgentTurn:
        """One chat call with the tools."""
        with call_scope(self.salt):
            reply = self.door.chat(self.model, [m.to_openai() for m in messages],
                                   tools=self.tools,
                                   temperature=self.temperature, max_tokens=self.max_tokens)
        return AgentTurn(
            content=reply.text or None,
            tool_calls=[ToolCall(call_id=c.call_id, name=c.name, arguments=c.arguments)
                        for c in reply.tool_calls],
            prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
            truncated=reply.truncated,
        )


_STAGE = re.compile(r"(S[1-5]):")


class ScriptedPolicy:
    """Replays a fixed list of ``(thought, language, code)`` steps, then submits.

    Args:
        model: name recorded in the ledger (scripted agents cost nothing).
        steps: the script.
    """

    def __init__(self, model: str, steps: Sequence[tuple[str, str, str]]) -> None:
        self.model, self.steps, self._next = model, list(steps), 0

    def next_turn(self, messages: Sequence[ChatMessage]) -> AgentTurn:
        """The next scripted call; ``submit_results`` once the script is exhausted."""
        index = self._next
        self._next += 1
        if index >= len(self.steps):
            return AgentTurn(content="Submitting.", tool_calls=[ToolCall(
                call_id=f"call_{index}", name=ToolName.SUBMIT_RESULTS.value, arguments="{}")])
        thought, language, code = self.steps[index]
        named = _STAGE.match(thought)  # "S3: pilot on …" serves S3
        args = json.dumps({"language": language, "code": code,
                           **({"stage": named.group(1).lower()} if named else {})})
        return AgentTurn(content=thought, tool_calls=[ToolCall(
            call_id=f"call_{index}", name=ToolName.EXECUTE_CODE.value, arguments=args)])
