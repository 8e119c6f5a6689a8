"""The one door to language models: litellm, bounded, retried and cached.

Callers depend on :class:`CompletionFn`; the default implementation is :class:`LiteLLMCompletion`.
Tests pass a fake function, or point ``MEDFLOWS_LLM_API_BASE`` at an OpenAI-compatible server on
127.0.0.1, so the real litellm path runs without a provider.

Every :class:`LiteLLMCompletion` in the process that talks to the same endpoint shares its
connection slots and rate caps, and retries transient failures (429, 5xx, timeouts, dropped
connections) with backoff (:mod:`tasks_lib.llm_limits`). After the last attempt the provider's
error propagates (an ``openai.APIError``), for the caller to record as data.

Credentials: by default a call with an ``api_base`` carries the operator's ``OPENAI_API_KEY``
(the operator configured that base) and a call without one lets litellm pick the provider's key.
A caller that talks to a base someone else gave (a submitter's registered endpoint) passes
``api_key`` (that endpoint's own key, or ``"not-needed"``): it is sent explicitly, so neither
this module nor litellm adds an environment key, and ``guard`` re-checks the base before every
request (:func:`tasks_lib.netpolicy.check_api_base`) and no redirect is followed.

Replies are cached through :mod:`tasks_lib.llm_cache` (on by default): a hit sends no request and
returns the original reply (usage and cost as first recorded) with ``cached=True``.

With the cache on, identical requests in flight at once are sent once and the reply shared
(:mod:`tasks_lib.llm_singleflight`, keyed like the cache): the sharer gets it as the cache would
have served it a moment later (redacted, ``cached=True``) and is accounted as a cache hit (in its
item's ``cost_usd`` at the original price and in ``cache_hits``, never in new spend), so the one
request is paid once; a failed request fails every caller that shared it. With the cache off every
call is sent (why: that module).

Calls are counted per :func:`~tasks_lib.llm_scope.call_scope`, and concurrent calls of one caller
(:func:`~tasks_lib.llm_scope.gather`) get their own cache keys (:mod:`tasks_lib.llm_scope`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.llm_cache import CallCache, call_key, note_call
from tasks_lib.llm_limits import connection_limit, estimate_tokens, rate_limit, with_backoff
from tasks_lib.llm_scope import CallScope, active_scope
from tasks_lib.llm_singleflight import SingleFlight
from tasks_lib.redaction import redact_model
from tasks_lib.settings import get_settings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


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
    cached: bool = Field(default=False, description="Served from the call cache, or shared "
                         "with an identical request in flight (no request of its own).")


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


def _unredirected(api_base: str, api_key: str | None) -> Any:
    """An OpenAI client that follows no redirect (litellm's own follows them, so a guarded base
    could send the request on to an address the guard refuses)."""
    import httpx
    import openai

    return openai.OpenAI(api_key=api_key or "not-needed", base_url=api_base, max_retries=0,
                         http_client=httpx.Client(follow_redirects=False))


_FLIGHTS: SingleFlight[Completion] = SingleFlight()
"""Calls in flight in this process, keyed by (cache root, cache key): one request per key."""


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
        api_key: the one credential every request carries (never an environment key; never
            logged, cached or part of a cache key). None: the operator's (module docstring).
        guard: called with ``api_base`` before every request; raises to refuse it. A guarded
            door keys its cache by ``api_base`` too, so another base's replies never serve it.
        extra: further keyword arguments for ``litellm.completion`` (never logged); the ones that
            shape the reply (seed, tools, response_format, …) are part of the cache key.
    """

    def __init__(self, api_base: str | None = None, retries: int = 4, base_delay: float = 1.0,
                 max_connections: int | None = None, cache: CallCache | bool | None = None,
                 rpm: int | None = None, tpm: int | None = None, *, api_key: str | None = None,
                 guard: Callable[[str], object] | None = None, **extra: Any) -> None:
        settings = get_settings()
        self.api_base = api_base or settings.llm_api_base
        self._api_key, self._guard = api_key, guard
        self._client = _unredirected(self.api_base, api_key) if guard and self.api_base else None
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
        scope = active_scope() or self._unscoped
        keyed = {**params, "endpoint_base": self.api_base} if self._guard else params
        branch, seen = scope.occurrence(call_key(model, sent, keyed))
        key = call_key(model, sent, keyed, seen, branch, scope.salt)
        if self.cache is None:
            reply = self._ask(model, sent, params)
        else:
            note_call(key)
            cache = self.cache
            flown = _FLIGHTS.run((cache.storage.root_url, key),
                                 lambda: self._through_cache(cache, key, model, sent, params))
            reply = flown.value
            if flown.shared:
                reply = redact_model(reply).model_copy(update={"cached": True})
        scope.record(reply)
        return reply

    def _through_cache(self, cache: CallCache, key: str, model: str, sent: list[dict[str, Any]],
                       params: dict[str, Any]) -> Completion:
        """The cached reply of ``key``, else the provider's (then stored, redacted)."""
        hit = cache.get(key, Completion)
        if hit is not None:
            return hit.model_copy(update={"cached": True})
        reply = self._ask(model, sent, params)
        cache.put(key, redact_model(reply))
        return reply

    def _ask(self, model: str, sent: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        import litellm

        kwargs: dict[str, Any] = dict(params)
        if self.api_base:
            kwargs["api_base"] = self.api_base
            kwargs.setdefault("api_key", os.environ.get("OPENAI_API_KEY") or "not-needed")
        if self._api_key is not None:
            kwargs["api_key"] = self._api_key
        if self._client is not None:
            kwargs["client"] = self._client
        if "tools" in kwargs:
            # litellm routes any call with tools through its MCP bridge (the optional `mcp`
            # package); our tools are plain functions.
            kwargs["_skip_mcp_handler"] = True
        estimate = estimate_tokens(sent, params.get("max_tokens"))

        def request() -> Any:
            if self._guard and self.api_base:
                self._guard(self.api_base)
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
