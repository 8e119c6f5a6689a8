"""The one door to language models: litellm, with retries and backoff on transient errors.

Callers depend on :class:`CompletionFn`; the default implementation is :func:`litellm_completion`.
Tests pass a fake function, or point ``MEDFLOWS_LLM_API_BASE`` at an OpenAI-compatible server on
127.0.0.1, so the real litellm path runs without a provider.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.settings import get_settings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


class Message(Frozen):
    """One chat message."""

    role: str = Field(description="system, user or assistant.")
    content: str = Field(description="Message text.")


class Completion(Frozen):
    """A model reply and what it cost in tokens and time."""

    text: str = Field(description="Reply text ('' when the model returned none).")
    prompt_tokens: int = Field(description="Input tokens reported by the provider.")
    completion_tokens: int = Field(description="Output tokens reported by the provider.")
    latency_s: float = Field(description="Wall time of the call including retries.")
    truncated: bool = Field(default=False, description="finish_reason was 'length'.")


class CompletionFn(Protocol):
    """Anything that turns messages into a :class:`Completion`."""

    def __call__(
        self, model: str, messages: Sequence[Message], *, max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> Completion: ...


def _transient() -> tuple[type[BaseException], ...]:
    from litellm import exceptions as llm_errors

    return (
        llm_errors.Timeout, llm_errors.RateLimitError, llm_errors.APIConnectionError,
        llm_errors.InternalServerError, llm_errors.ServiceUnavailableError,
    )


def with_backoff(
    call: Callable[[], Any], *, retries: int, base_delay: float,
    transient: tuple[type[BaseException], ...],
) -> Any:
    """Run ``call``; on a transient error wait ``base_delay · 2^attempt`` and try again."""
    for attempt in range(retries + 1):
        try:
            return call()
        except transient:
            if attempt == retries:
                raise
            time.sleep(base_delay * 2**attempt)
    raise AssertionError("unreachable")


class LiteLLMCompletion:
    """:class:`CompletionFn` backed by ``litellm.completion``.

    Args:
        api_base: OpenAI-compatible endpoint (default: the ``llm_api_base`` setting, if set).
        retries: attempts after the first on transient errors.
        base_delay: first backoff delay in seconds.
        extra: further keyword arguments for ``litellm.completion`` (never logged).
    """

    def __init__(self, api_base: str | None = None, retries: int = 4, base_delay: float = 1.0,
                 **extra: Any) -> None:
        self.api_base = api_base or get_settings().llm_api_base
        self.retries, self.base_delay, self.extra = retries, base_delay, extra

    def __call__(
        self, model: str, messages: Sequence[Message], *, max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> Completion:
        import litellm

        kwargs: dict[str, Any] = dict(self.extra)
        if self.api_base:
            kwargs["api_base"] = self.api_base
            kwargs.setdefault("api_key", os.environ.get("OPENAI_API_KEY") or "not-needed")
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        started = time.perf_counter()
        response = with_backoff(
            lambda: litellm.completion(
                model=model, messages=[m.model_dump() for m in messages],
                temperature=temperature, num_retries=0, **kwargs,
            ),
            retries=self.retries, base_delay=self.base_delay, transient=_transient(),
        )
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        return Completion(
            text=choice.message.content or "",
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            latency_s=time.perf_counter() - started,
            truncated=choice.finish_reason == "length",
        )
