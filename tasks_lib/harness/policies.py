"""Policies decide each turn of the loop: a litellm model, or a scripted agent (offline).

A new harness implements :class:`Policy`; the loop in :mod:`tasks_lib.harness.loop` is shared.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Protocol

from tasks_lib.harness.messages import TOOLS, AgentTurn, ChatMessage, ToolCall, ToolName
from tasks_lib.llm import _transient, with_backoff
from tasks_lib.settings import get_settings


class Policy(Protocol):
    """Produces the next assistant turn from the conversation so far."""

    model: str

    def next_turn(self, messages: Sequence[ChatMessage]) -> AgentTurn:
        """The assistant's reply (text and/or tool calls)."""
        ...


class LiteLLMPolicy:
    """A tool-calling model behind ``litellm.completion`` (temperature 0 by default).

    Args:
        model: litellm model string.
        api_base: OpenAI-compatible endpoint (default: the ``llm_api_base`` setting).
        temperature: sampling temperature.
        max_tokens: output cap per turn (a reply hitting it is marked truncated).
        retries: retries with exponential backoff on transient provider errors.
        base_delay: first backoff delay in seconds.
    """

    def __init__(self, model: str, api_base: str | None = None, temperature: float = 0.0,
                 max_tokens: int = 4096, retries: int = 4, base_delay: float = 1.0) -> None:
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.api_base = api_base or get_settings().llm_api_base
        self.retries, self.base_delay = retries, base_delay

    def next_turn(self, messages: Sequence[ChatMessage]) -> AgentTurn:
        """One ``litellm.completion`` call with the two tools.

        ``_skip_mcp_handler``: litellm routes any call with ``tools`` through its MCP bridge,
        which imports the optional ``mcp`` package; our tools are plain functions.
        """
        import litellm

        kwargs: dict[str, Any] = {}
        if self.api_base:
            kwargs.update(api_base=self.api_base,
                          api_key=os.environ.get("OPENAI_API_KEY") or "not-needed")
        response = with_backoff(
            lambda: litellm.completion(
                model=self.model, messages=[m.to_openai() for m in messages], tools=TOOLS,
                temperature=self.temperature, max_tokens=self.max_tokens, num_retries=0,
                _skip_mcp_handler=True, **kwargs),
            retries=self.retries, base_delay=self.base_delay, transient=_transient(),
        )
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        calls = [ToolCall(call_id=c.id or f"call_{i}", name=c.function.name or "",
                          arguments=c.function.arguments or "")
                 for i, c in enumerate(choice.message.tool_calls or [])]
        return AgentTurn(
            content=choice.message.content, tool_calls=calls,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            truncated=choice.finish_reason == "length",
        )


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
        args = json.dumps({"language": language, "code": code})
        return AgentTurn(content=thought, tool_calls=[ToolCall(
            call_id=f"call_{index}", name=ToolName.EXECUTE_CODE.value, arguments=args)])
