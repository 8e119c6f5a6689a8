"""Accounting and concurrency of model calls: call scopes, gather branches, parallel maps.

A :func:`call_scope` (e.g. one QA item) counts the calls made inside it (:class:`CallScope`:
calls, cache hits, tokens). Independent calls of one caller run concurrently with :func:`gather`
(cot_sc's samples, a panel's personas); each branch gets its own place in the cache key, so the
n-th sample is the same cache entry in every run, whatever order the threads finish in.
:func:`parallel_map` runs distinct requests (screening probes, judge calls) on a few threads.
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from tasks_lib.llm import Completion


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
        """Count one reply (asked, served from the cache or shared with an identical request in
        flight)."""
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
    """Count the :class:`~tasks_lib.llm.LiteLLMCompletion` calls made inside the block (in this
    thread and in the :func:`gather` branches it starts). A ``salt`` (e.g. the replicate) becomes
    part of every cache key, so independent repetitions of the same work never share replies."""
    scope = CallScope(salt)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def active_scope() -> CallScope | None:
    """The innermost :func:`call_scope` the caller runs in (``None`` outside any)."""
    return _SCOPE.get()


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
