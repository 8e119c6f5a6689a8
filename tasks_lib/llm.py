"""The one door to language models: litellm, bounded, retried and cached.

Callers depend on :class:`CompletionFn`; the default implementation is :class:`LiteLLMCompletion`.
Tests pass a fake function, or point ``MEDFLOWS_LLM_API_BASE`` at an OpenAI-compatible server on
127.0.0.1, so the real litellm path runs without a provider.

Every :class:`LiteLLMCompletion` in the process that talks to the same endpoint (api_base) with the
same limit shares one semaphore of ``max_connections`` slots, so any number of caller threads never
open more connections than that. A slot is held only while a request is in flight, never during a
backoff sleep or a rate-limit wait. Optional requests-per-minute and tokens-per-minute caps
(:class:`RateLimiter`, token buckets) are likewise shared by every caller of an endpoint. Transient
failures (429, 5xx, timeouts, dropped connections) are retried with exponential backoff and
jitter; a 429's ``Retry-After`` is always waited out. After the last attempt the provider's error
propagates (an ``openai.APIError``), for the caller to record as data.

Replies are cached through :mod:`tasks_lib.llm_cache` (on by default): a hit sends no request and
returns the original reply (usage and cost as first recorded) with ``cached=True``.

Independent calls of one caller run concurrently with :func:`gather` (cot_sc's samples, a panel's
personas); each branch gets its own place in the cache key, so the n-th sample is the same cache
entry in every run, whatever order the threads finish in.
"""

from __future__ import annotations

import contextvars
import email.utils
import math
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

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


class ToolRequest(Frozen):
    """A tool call the model asked for."""

    call_id: str = Field(description="Provider's id of the call (echoed in the tool reply).")
    name: str = Field(description="Tool name.")
    arguments: str = Field(description="JSON arguments as the model wrote them.")


class Completion(Frozen):
    """A model reply and what it cost in tokens and time."""

    text: str = Field(description="Reply text ('' when the model returned none).")
    tool_calls: list[ToolRequest] = Field(
        default_factory=list, description="Tool calls the model asked for (tool-calling loops).")
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


class RateLimiter:
    """Requests-per-minute and tokens-per-minute caps as token buckets (thread-safe).

    Each bucket refills continuously at the per-minute rate and holds at most one second's
    allowance (at least one request), because providers enforce per-minute limits in shorter
    slices (60,000 RPM as 1,000 per second), so a minute's burst up front would be refused. A
    request first takes one request token and its estimated tokens (prompt characters / 4 +
    ``max_tokens``); once the reply's usage is known the estimate is corrected (:meth:`settle`),
    so the token bucket can go negative and later callers wait for it to refill.

    Args:
        rpm: requests per minute (None = no cap).
        tpm: tokens per minute (None = no cap).
        clock: monotonic clock (tests pass a fake).
        sleep: how to wait (tests pass a fake that advances the clock).
    """

    def __init__(self, rpm: int | None, tpm: int | None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rpm, self.tpm, self.clock, self.sleep = rpm, tpm, clock, sleep
        self.request_burst = max(1.0, (rpm or 0) / 60)
        self.token_burst = max(1.0, (tpm or 0) / 60)
        self._requests, self._tokens = self.request_burst, self.token_burst
        self._stamp = clock()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self.clock()
        elapsed, self._stamp = now - self._stamp, now
        if self.rpm:
            self._requests = min(self.request_burst, self._requests + elapsed * self.rpm / 60)
        if self.tpm:
            self._tokens = min(self.token_burst, self._tokens + elapsed * self.tpm / 60)

    def acquire(self, tokens: int = 0) -> float:
        """Block until one request and ``tokens`` (capped at one second's worth: a bigger request
        waits for a full bucket, then drives it negative) are available, then take them; returns
        the seconds waited."""
        need_tokens = min(float(tokens), self.token_burst) if self.tpm else 0.0
        waited = 0.0
        while True:
            with self._lock:
                self._refill()
                short_r = (1.0 - self._requests) * 60 / self.rpm if self.rpm else 0.0
                short_t = (need_tokens - self._tokens) * 60 / self.tpm if self.tpm else 0.0
                wait = max(short_r, short_t, 0.0)
                if wait <= 0:
                    if self.rpm:
                        self._requests -= 1.0
                    if self.tpm:
                        self._tokens -= need_tokens
                    return waited
            self.sleep(wait)
            waited += wait

    def settle(self, estimated: int, actual: int) -> None:
        """Correct the token bucket once a reply's real usage is known."""
        if self.tpm:
            with self._lock:
                self._tokens -= float(actual) - min(float(estimated), self.token_burst)


def estimate_tokens(messages: Sequence[Mapping[str, Any]], max_tokens: int | None) -> int:
    """Tokens a request may use, before asking: prompt characters / 4 plus the output cap."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return math.ceil(chars / 4) + (max_tokens or 0)


class CallScope:
    """Accounting of the calls made inside one :func:`call_scope` (e.g. one QA item).

    Also numbers repeated identical requests per :func:`gather` branch, so the n-th sample of
    one prompt has its own cache key, the same in every run.
    """

    def __init__(self, salt: str = "") -> None:
        self.salt = salt
        self.calls = self.cache_hits = self.prompt_tokens = self.completion_tokens = 0
        self.new_prompt_tokens = self.new_completion_tokens = 0
        self.new_cost_usd: float | None = 0.0
        self._seen: Counter[tuple[tuple[int, ...], str]] = Counter()
        self._lock = threading.Lock()

    def occurrence(self, request_key: str) -> tuple[tuple[int, ...], int]:
        """This call's branch and how many times ``request_key`` was asked before on that branch
        in this scope (then count this one)."""
        branch = _BRANCH.get()
        with self._lock:
            seen = self._seen[branch, request_key]
            self._seen[branch, request_key] += 1
            return branch, seen

    def record(self, reply: Completion) -> None:
        """Count one reply (asked or served from the cache)."""
        with self._lock:
            self.calls += 1
            self.cache_hits += int(reply.cached)
            self.prompt_tokens += reply.prompt_tokens
            self.completion_tokens += reply.completion_tokens
            if not reply.cached:
                self.new_prompt_tokens += reply.prompt_tokens
                self.new_completion_tokens += reply.completion_tokens


_SCOPE: ContextVar[CallScope | None] = ContextVar("medflows_call_scope", default=None)
_BRANCH: ContextVar[tuple[int, ...]] = ContextVar("medflows_call_branch", default=())


@contextmanager
def call_scope(salt: str = "") -> Iterator[CallScope]:
    """Count the :class:`LiteLLMCompletion` calls made inside the block (in this thread and in
    the :func:`gather` branches it starts). A ``salt`` (e.g. the replicate) becomes part of every
    cache key, so independent repetitions of the same work never share replies."""
    scope = CallScope(salt)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


T = TypeVar("T")


def current_branch() -> tuple[int, ...]:
    """The :func:`gather` branch the caller runs on (``()`` outside any): which of a method's
    concurrent calls this is, e.g. for a fake model that answers sample ``i`` its own way."""
    return _BRANCH.get()


U = TypeVar("U")


def parallel_map(fn: Callable[[U], T], items: Sequence[U], max_workers: int) -> list[T]:
    """``fn`` over ``items`` on up to ``max_workers`` threads (each in a copy of the caller's
    context); results in item order. For independent, distinct requests (screening probes,
    judge calls); use :func:`gather` for repeated samples of one prompt."""
    if max_workers <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(max_workers, len(items)),
                            thread_name_prefix="llm-map") as pool:
        futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
        return [f.result() for f in futures]


def gather(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run independent calls concurrently; results in the order given.

    Each call runs in a copy of the caller's context (same :func:`call_scope`) on its own branch,
    so cache keys do not depend on which thread finishes first and a concurrent run equals a
    serial one. The endpoint's connection limit still bounds requests in flight. The first
    exception (in order) propagates after every call has finished.
    """
    if len(calls) <= 1:
        return [call() for call in calls]
    parent = _BRANCH.get()

    def branch(index: int, call: Callable[[], T]) -> T:
        _BRANCH.set((*parent, index))
        return call()

    contexts = [contextvars.copy_context() for _ in calls]
    with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="llm-branch") as pool:
        futures = [pool.submit(ctx.run, branch, i, call)
                   for i, (ctx, call) in enumerate(zip(contexts, calls, strict=True))]
        return [f.result() for f in futures]


_LIMITS: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_RATES: dict[tuple[str, int | None, int | None], RateLimiter] = {}
_LIMITS_LOCK = threading.Lock()


def connection_limit(api_base: str | None, max_connections: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore of an endpoint (``None`` = the provider's default endpoint)."""
    key = (api_base or "<provider default>", max_connections)
    with _LIMITS_LOCK:
        if key not in _LIMITS:
            _LIMITS[key] = threading.BoundedSemaphore(max_connections)
        return _LIMITS[key]


def rate_limit(api_base: str | None, rpm: int | None, tpm: int | None) -> RateLimiter | None:
    """The process-wide rate limiter of an endpoint with these caps (None when uncapped)."""
    if not rpm and not tpm:
        return None
    key = (api_base or "<provider default>", rpm, tpm)
    with _LIMITS_LOCK:
        if key not in _RATES:
            _RATES[key] = RateLimiter(rpm, tpm)
        return _RATES[key]


class CallOptions(Frozen):
    """How a run talks to its provider (never part of what it asks, so never of a run id)."""

    max_connections: int | None = Field(
        default=None, ge=1, description="Concurrent requests per endpoint (None = the agent's "
        "`max_connections` param, else the MEDFLOWS_MAX_CONNECTIONS setting).")
    rpm: int | None = Field(default=None, ge=1, description="Requests-per-minute cap (None = the "
                            "agent's `rpm` param, else MEDFLOWS_RPM_LIMIT, else none).")
    tpm: int | None = Field(default=None, ge=1, description="Tokens-per-minute cap (None = the "
                            "agent's `tpm` param, else MEDFLOWS_TPM_LIMIT, else none).")
    cache: bool = Field(default=True, description="Use the call cache (when the setting is on).")


class LiteLLMCompletion:
    """:class:`CompletionFn` backed by ``litellm.completion``; safe to call from many threads.

    Args:
        api_base: OpenAI-compatible endpoint (default: the ``llm_api_base`` setting, if set).
        retries: attempts after the first on transient errors.
        base_delay: first backoff delay in seconds.
        max_connections: concurrent requests to this endpoint (default: the setting).
        cache: a :class:`~tasks_lib.llm_cache.CallCache`, False for none, None for the setting's.
        rpm: requests-per-minute cap of the endpoint (default: the setting; None = no cap).
        tpm: tokens-per-minute cap of the endpoint (default: the setting; None = no cap).
        extra: further keyword arguments for ``litellm.completion`` (never logged); the ones that
            shape the reply (seed, tools, response_format, …) are part of the cache key.
    """

    def __init__(self, api_base: str | None = None, retries: int = 4, base_delay: float = 1.0,
                 max_connections: int | None = None, cache: CallCache | bool | None = None,
                 rpm: int | None = None, tpm: int | None = None, **extra: Any) -> None:
        settings = get_settings()
        self.api_base = api_base or settings.llm_api_base
        self.retries, self.base_delay, self.extra = retries, base_delay, extra
        self.max_connections = max_connections or settings.max_connections
        self.slots = connection_limit(self.api_base, self.max_connections)
        self.rates = rate_limit(self.api_base, rpm or settings.rpm_limit,
                                tpm or settings.tpm_limit)
        self.cache = cache if isinstance(cache, CallCache) else (
            CallCache.from_settings() if cache is None or cache is True else None)
        self._unscoped = CallScope()

    @classmethod
    def for_run(cls, params: Mapping[str, Any], options: CallOptions | None = None,
                **kwargs: Any) -> LiteLLMCompletion:
        """The door of one run: ``options`` (CLI flags, flow parameters) over the agent's
        ``params`` (api_base, max_connections, rpm, tpm) over the settings."""
        options = options or CallOptions()

        def pick(name: str) -> int | None:
            value = getattr(options, name)
            if value is None and params.get(name) is not None:
                value = int(str(params[name]))
            return value  # type: ignore[no-any-return]

        api_base = params.get("api_base")
        return cls(api_base=str(api_base) if api_base else None,
                   max_connections=pick("max_connections"), rpm=pick("rpm"), tpm=pick("tpm"),
                   cache=None if options.cache else False, **kwargs)

    def __call__(
        self, model: str, messages: Sequence[Message], *, max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> Completion:
        params: dict[str, Any] = {"temperature": temperature}
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        return self.chat(model, [m.model_dump() for m in messages], **params)

    def chat(self, model: str, messages: Sequence[Mapping[str, Any]], **params: Any
             ) -> Completion:
        """Any chat request (OpenAI-format messages, ``tools``, ``response_format``, …) through
        the cache, the rate and connection limits and the retries."""
        sent = [dict(m) for m in messages]
        params = {**self.extra, **params}
        scope = _SCOPE.get() or self._unscoped
        branch, seen = scope.occurrence(call_key(model, sent, params))
        key = call_key(model, sent, params, seen, branch, scope.salt)
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
        if "tools" in kwargs:
            # litellm routes any call with tools through its MCP bridge (the optional `mcp`
            # package); our tools are plain functions.
            kwargs["_skip_mcp_handler"] = True
        estimate = estimate_tokens(sent, params.get("max_tokens"))

        def request() -> Any:
            if self.rates:
                self.rates.acquire(estimate)
            with self.slots:
                return litellm.completion(model=model, messages=sent, num_retries=0, **kwargs)

        started = time.perf_counter()
        response = with_backoff(request, retries=self.retries, base_delay=self.base_delay,
                                transient=_transient())
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        if self.rates:
            self.rates.settle(estimate, prompt_tokens + completion_tokens)
        cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        return Completion(
            text=choice.message.content or "",
            tool_calls=[ToolRequest(call_id=c.id or f"call_{i}", name=c.function.name or "",
                                    arguments=c.function.arguments or "")
                        for i, c in enumerate(getattr(choice.message, "tool_calls", None) or [])],
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            latency_s=time.perf_counter() - started,
            truncated=choice.finish_reason == "length",
            cost_usd=None if cost is None else float(cost),
        )
