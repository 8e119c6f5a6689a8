"""Single-flight: identical model calls in flight at once are sent once and their reply shared.

The call cache (:mod:`tasks_lib.llm_cache`) is filled only when a reply returns, so without this
module two items asking the identical request at the same moment (e.g. the answer extractor shown
the same reply text by different items) would each send it. :class:`SingleFlight` closes that
window: the first caller of a key (the *leader*) runs the work; a caller of the same key that
arrives while the leader works waits for it and gets the leader's result. Keys are the call
cache's keys, so what is shared is exactly what the cache would have served a moment later: the
occurrence, the :func:`~tasks_lib.llm_scope.gather` branch and the salt are part of the key, so
distinct samples of one prompt and independent replicates are never shared.

Choices, and why:

* **A leader's failure is the waiters' failure** (the same exception object, as
  :meth:`concurrent.futures.Future.result` raises it). The leader has already retried transient
  errors with backoff under the endpoint's rate and connection limits; waiters retrying on their
  own would multiply the attempts on a provider that is failing, and a permanent error (a bad key,
  a rejected request) would fail identically. A failure is never stored, so the next caller after
  the flight ends asks afresh.
* **Process-wide, one table per** :class:`SingleFlight`; an entry lives only while its leader
  works and is removed when the work ends, on success or on any error (``BaseException`` too), so
  the table never grows and a waiter is never left waiting on a leader that has gone.
* **The leader publishes before it leaves**: the work a caller gives (in the call layer: read the
  cache, ask, write the cache) ends before the entry is removed, so a caller of the key sees
  either the flight or the cache entry, never neither; the number of requests sent equals the
  number of distinct keys, whatever the thread timing (a key whose request failed is asked
  again by its next caller).
* **Only with the call cache on** (the call layer passes every call straight to the provider
  when ``MEDFLOWS_LLM_CACHE=false`` or ``CallOptions.cache=False``). Sharing is the in-flight
  half of the cache: with the cache on, a serial run sends each distinct request once and serves
  its repeats from the cache, and sharing makes a concurrent run send exactly that. A user who
  turned the cache off asked for every call to reach the provider (fresh samples, a provider
  measured as it is): a serial run then sends every call, and sharing would make the number of
  requests, and the replies, depend on which threads happen to overlap.
* **Keyed like the cache, per cache root**: the call layer's key is ``(storage root, call
  key)``, so two doors share exactly when one could have served the other from its cache.

Waiters hold no connection slot or rate token while they wait (only the leader asks).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Generic, NamedTuple, TypeVar

T = TypeVar("T")


class Flown(NamedTuple, Generic[T]):
    """What :meth:`SingleFlight.run` returns."""

    value: T
    """The work's result (the leader's, for a waiter)."""
    shared: bool
    """True for a waiter that got another caller's result without running the work."""


class _Flight(Generic[T]):
    """One key's work in progress: its outcome and how many callers wait for it."""

    def __init__(self) -> None:
        self.outcome: Future[T] = Future()
        self.waiters = 0


class SingleFlight(Generic[T]):
    """Run ``work`` once per key among the callers that ask for that key at the same time;
    safe to call from many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flights: dict[Hashable, _Flight[T]] = {}

    def run(self, key: Hashable, work: Callable[[], T]) -> Flown[T]:
        """``work()`` if no call of ``key`` is in flight, else the in-flight call's result.

        Raises:
            BaseException: whatever the leader's ``work`` raised (for the leader and every
                waiter of that flight).
        """
        with self._lock:
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
            else:
                flight.waiters += 1
        if not leader:
            return Flown(flight.outcome.result(), True)
        try:
            value = work()
        except BaseException as exc:
            flight.outcome.set_exception(exc)
            raise
        else:
            flight.outcome.set_result(value)
            return Flown(value, False)
        finally:
            with self._lock:
                del self._flights[key]

    def in_flight(self) -> int:
        """How many keys have a leader at work now (0 when the process is idle)."""
        with self._lock:
            return len(self._flights)

    def waiting(self) -> int:
        """How many callers wait for a leader now (those that joined a flight still running)."""
        with self._lock:
            return sum(f.waiters for f in self._flights.values())
