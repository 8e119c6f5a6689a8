"""The one door to language models: litellm, bounded, retried and cached.

Callers depend on :class:`CompletionFn`; the default implementation is :class:`LiteLLMCompletion`.
Tests pass a fake function, or point ``MEDFLOWS_LLM_API_BASE`` at an OpenAI-compatible server on
127.0.0.1, so the real litellm path runs without a provider.

Every :class:`LiteLLMCompletion` in the process that talks to the same endpoint (api_base) with the
same limit shares one semaphore of ``max_connections`` slots, so any number of caller threads never
open more connections than that. A slot is held only while a request is in flight, never during a
backoff sleep. Transient failures (429, 5xx, timeouts, dropped connections) are retried with
exponential backoff and jitter; a 429's ``Retry-After`` is always waited out. After the last attempt
the provider's error propagates (an ``openai.APIError``), for the caller to record as data.

Replies are cached through :mod:`tasks_lib.llm_cache` (on by default): a hit sends no request and
returns the original reply (usage and cost as first recorded) with ``cached=True``.
"""

from __future__ import annotations

import email.utils
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.llm_cache import CallCache, call_key
from tasks_lib.settings import get_settings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MAX_DELAY_S = 60.0
"""Ceiling of one exponential backoff sleep (a longer ``Retry-After`` is still honoured)."""


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
    cost_usd: float | None = Field(
        default=None, description="USD litellm priced the call at (None when it knows no price).")
    cached: bool = Field(default=False, description="Served from the call cache (no request).")


class CompletionFn(Protocol):
    """Anything that turns messages into a :class:`Completion`."""

    def __call__(
        self, model: str, messages: Sequence[Message], *, max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> Completion: ...


def _transient() -> tuple[type[BaseException], ...]:
    import openai
    from litellm import exceptions as llm_errors

    return (
        llm_errors.Timeout, llm_errors.RateLimitError, llm_errors.APIConnectionError,
        llm_errors.InternalServerError, llm_errors.ServiceUnavailableError,
        openai.InternalServerError, openai.RateLimitError, openai.APIConnectionError,
    )


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait (``Retry-After``/``retry-after-ms``), if it did."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(exc, "headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass  # not a number: fall through to Retry-After
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass  # an HTTP date, below
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unparseable: plain exponential backoff applies
    return max(0.0, when.timestamp() - time.time())


def backoff_delay(attempt: int, base_delay: float, retry_after: float | None = None,
                  rng: random.Random | None = None) -> float:
    """Sleep before retry ``attempt`` (0-based): ``Retry-After`` + up to 10 % jitter when given,
    else ``base_delay · 2^attempt`` (capped at :data:`MAX_DELAY_S`) with 50–100 % jitter."""
    draw = (rng or random).uniform
    if retry_after is not None:
        return retry_after * draw(1.0, 1.1)
    return float(min(MAX_DELAY_S, base_delay * 2**attempt) * draw(0.5, 1.0))


def with_backoff(
    call: Callable[[], Any], *, retries: int, base_delay: float,
    transient: tuple[type[BaseException], ...], sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """Run ``call``; on a transient error sleep (see :func:`backoff_delay`) and try again.

    Args:
        call: The request.
        retries: Attempts after the first; the last attempt's error propagates.
        base_delay: First backoff delay in seconds.
        transient: Exception types worth retrying.
        sleep: How to wait (tests pass a recorder).
    """
    for attempt in range(retries + 1):
        try:
            return call()
        except transient as exc:
            if attempt == retries:
                raise
            sleep(backoff_delay(attempt, base_delay, retry_after_s(exc)))
    raise AssertionError("unreachable")


class CallScope:
    """Accounting of the calls made inside one :func:`call_scope` (e.g. one QA item).

    Also numbers repeated identical requests, so the n-th sample of one prompt has its own cache
    key, the same in every run.
    """

    def __init__(self) -> None:
        self.calls = self.cache_hits = self.prompt_tokens = self.completion_tokens = 0
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def occurrence(self, request_key: str) -> int:
        """How many times ``request_key`` was asked before in this scope (then count this one)."""
        with self._lock:
            seen = self._seen[request_key]
            self._seen[request_key] += 1
            return seen

    def record(self, reply: Completion) -> None:
        """Count one reply (asked or served from the cache)."""
        with self._lock:
            self.calls += 1
            self.cache_hits += int(reply.cached)
            self.prompt_tokens += reply.prompt_tokens
            self.completion_tokens += reply.completion_tokens


_SCOPE: ContextVar[CallScope | None] = ContextVar("medflows_call_scope", default=None)


@contextmanager
def call_scope() -> Iterator[CallScope]:
    """Count the :class:`LiteLLMCompletion` calls made inside the block (in this thread)."""
    scope = CallScope()
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


_LIMITS: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_LIMITS_LOCK = threading.Lock()


def connection_limit(api_base: str | None, max_connections: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore of an endpoint (``None`` = the provider's default endpoint)."""
    key = (api_base or "<provider default>", max_connections)
    with _LIMITS_LOCK:
        if key not in _LIMITS:
            _LIMITS[key] = threading.BoundedSemaphore(max_connections)
        return _LIMITS[key]


class LiteLLMCompletion:
    """:class:`CompletionFn` backed by ``litellm.completion``; safe to call from many threads.

    Args:
        api_base: OpenAI-compatible endpoint (default: the ``llm_api_base`` setting, if set).
        retries: attempts after the first on transient errors.
        base_delay: first backoff delay in seconds.
        max_connections: concurrent requests to this endpoint (default: the setting).
        cache: a :class:`~tasks_lib.llm_cache.CallCache`, False for none, None for the setting's.
        extra: further keyword arguments for ``litellm.completion`` (never logged); the ones that
            shape the reply (seed, tools, response_format, …) are part of the cache key.
    """

    def __init__(self, api_base: str | None = None, retries: int = 4, base_delay: float = 1.0,
                 max_connections: int | None = None, cache: CallCache | bool | None = None,
                 **extra: Any) -> None:
        settings = get_settings()
        self.api_base = api_base or settings.llm_api_base
        self.retries, self.base_delay, self.extra = retries, base_delay, extra
        self.max_connections = max_connections or settings.max_connections
        self.slots = connection_limit(self.api_base, self.max_connections)
        self.cache = cache if isinstance(cache, CallCache) else (
            CallCache.from_settings() if cache is None or cache is True else None)
        self._unscoped = CallScope()

    def __call__(
        self, model: str, messages: Sequence[Message], *, max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> Completion:
        sent = [m.model_dump() for m in messages]
        params: dict[str, Any] = {**self.extra, "temperature": temperature}
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        scope = _SCOPE.get() or self._unscoped
        key = call_key(model, sent, params, scope.occurrence(call_key(model, sent, params)))
        reply = self.cache.get(key, Completion) if self.cache else None
        if reply is not None:
            reply = reply.model_copy(update={"cached": True})
        else:
            reply = self._ask(model, sent, params)
            if self.cache:
                self.cache.put(key, reply)
        scope.record(reply)
        return reply

    def _ask(self, model: str, sent: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        import litellm

        kwargs: dict[str, Any] = dict(params)
        if self.api_base:
            kwargs["api_base"] = self.api_base
            kwargs.setdefault("api_key", os.environ.get("OPENAI_API_KEY") or "not-needed")

        def request() -> Any:
            with self.slots:
                return litellm.completion(model=model, messages=sent, num_retries=0, **kwargs)

        started = time.perf_counter()
        response = with_backoff(request, retries=self.retries, base_delay=self.base_delay,
                                transient=_transient())
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        return Completion(
            text=choice.message.content or "",
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            latency_s=time.perf_counter() - started,
            truncated=choice.finish_reason == "length",
            cost_usd=None if cost is None else float(cost),
        )
