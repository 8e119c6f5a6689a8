"""Retries and endpoint limits of the model-call layer: backoff, rate and connection caps.

Transient failures are retried by :func:`with_backoff` with exponential backoff and jitter
(:func:`backoff_delay`); a 429's ``Retry-After`` (:func:`retry_after_s`) is always waited out.
Every caller that talks to the same endpoint (api_base) with the same limit shares one semaphore of
``max_connections`` slots (:func:`connection_limit`) and, when capped, one
requests-per-minute/tokens-per-minute :class:`RateLimiter` (:func:`rate_limit`), so any number of
caller threads stay within the endpoint's limits. :class:`tasks_lib.llm.LiteLLMCompletion` holds a
slot only while a request is in flight, never during a backoff sleep or a rate-limit wait.
"""

from __future__ import annotations

import email.utils
import math
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

MAX_DELAY_S = 60.0
"""Ceiling of one exponential backoff sleep (a longer ``Retry-After`` is still honoured)."""


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
