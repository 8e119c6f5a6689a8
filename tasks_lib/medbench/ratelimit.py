"""Rolling-window rate limits (pure): how long until ``n`` more units fit under a limit.

A submitter's uploads per day and items per minute are each a limit over a rolling window
(24 h, 60 s). Used units are the accepted events inside the window; a refused request uses
nothing. When a request does not fit, the wait is the time until enough of the oldest events
leave the window — the ``Retry-After`` of an HTTP 429.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import NamedTuple

DAY_S = 86_400.0
MINUTE_S = 60.0


class LimitKind(StrEnum):
    """What a rate limit counts."""

    UPLOAD = "upload"
    """Accepted uploads (window: one day)."""
    ITEMS = "items"
    """Items served in a split or received in an upload (window: one minute)."""
    FAILED_KEY = "failed_key"
    """Wrong API keys from one client or for one key id (in memory, per service process)."""


class Event(NamedTuple):
    """``n`` units used at unix time ``at``."""

    at: float
    n: int


class Limit(NamedTuple):
    """At most ``limit`` units of ``kind`` per ``window_s`` seconds."""

    kind: LimitKind
    limit: int
    window_s: float


class Refusal(NamedTuple):
    """A request that does not fit: which limit, and seconds until it would (None: never —
    the request alone is larger than the limit)."""

    limit: Limit
    used: int
    retry_after_s: float | None


def wait_s(events: Iterable[Event], limit: Limit, n: int, now: float) -> float | None:
    """Seconds until ``n`` more units fit under ``limit`` (0.0: they fit now; None: never).

    Args:
        events: Accepted events (any order; those outside the window are ignored).
        limit: The limit and its window.
        n: Units the request needs.
        now: Current unix time.
    """
    if n > limit.limit:
        return None
    inside = sorted(e for e in events if e.at > now - limit.window_s)
    excess = sum(e.n for e in inside) + n - limit.limit
    for event in inside:
        if excess <= 0:
            break
        excess -= event.n
        if excess <= 0:
            return max(0.0, event.at + limit.window_s - now)
    return 0.0


def check(events: Iterable[Event], limit: Limit, n: int, now: float) -> Refusal | None:
    """None when ``n`` more units fit now; otherwise the :class:`Refusal`."""
    events = list(events)
    wait = wait_s(events, limit, n, now)
    if wait == 0.0:
        return None
    used = sum(e.n for e in events if e.at > now - limit.window_s)
    return Refusal(limit, used, wait)
