"""The one item-by-item runner: ``ask(item)`` for every item of a batch, concurrently, under limits.

Every front half that walks items one at a time (QA's live methods, MedBench API mode) runs on
:func:`run_items`:

* Items start in order on up to ``max_workers`` threads, each in a copy of the caller's
  :mod:`contextvars` context, so an enclosing :func:`~tasks_lib.llm_scope.call_scope` counts the
  calls of every item. Results come back in item order, however the threads finish.
* No item starts once the run's deadline has passed or its spend has reached the cost cap
  (:class:`RunLimits`); items already running finish and are kept. Because items start in order
  and a stop is final, the results are always those of a prefix of the items, and
  :attr:`ItemBatch.stopped` says why the rest were not started.
* Spend: each finished item's ``cost_of(result)`` is added to ``limits.spent_usd``. An unknown
  cost (``None``) makes the spend unknown — never a silent 0 — and a cost cap that can no longer
  be checked stops the run as if it were reached (:attr:`StopReason.BUDGET`).
* ``progress`` is called once per finished item, from the calling thread, as items finish.
* An exception in one item (or in ``progress``) starts no further item, waits for the running
  ones and propagates.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from enum import StrEnum
from typing import Generic, NamedTuple, TypeVar

from pydantic import Field

from tasks_lib.domain import Frozen

T = TypeVar("T")
R = TypeVar("R")


class StopReason(StrEnum):
    """Why a run stopped before every item was started."""

    TIME = "time"
    BUDGET = "budget"


class RunLimits(Frozen):
    """When a run stops starting items."""

    deadline: float | None = Field(default=None, description="time.monotonic() after which no "
                                   "item starts (the run's time budget).")
    max_cost_usd: float | None = Field(default=None, ge=0, description="Stop starting items "
                                       "once the run's cost reaches this (USD).")
    spent_usd: float = Field(default=0.0, ge=0, description="Cost of the run's earlier chunks.")


class ItemBatch(NamedTuple, Generic[R]):
    """What :func:`run_items` produced."""

    results: list[R]
    """Results of the started items, in item order: those of the first ``len(results)`` items."""
    stopped: StopReason | None
    """Why the remaining items were not started (None: every item was)."""
    spent_usd: float | None
    """``limits.spent_usd`` plus the finished items' costs (None: some cost was unknown)."""


class _Meter:
    """A run's spend against its limits (used from the calling thread only)."""

    def __init__(self, limits: RunLimits) -> None:
        self.limits = limits
        self.spent: float | None = limits.spent_usd
        self.stopped: StopReason | None = None

    def add(self, cost: float | None) -> None:
        self.spent = None if self.spent is None or cost is None else self.spent + cost

    def may_start(self) -> bool:
        """Whether the next item may start (a refusal is final and records why)."""
        deadline, cap = self.limits.deadline, self.limits.max_cost_usd
        if self.stopped is None:
            if deadline is not None and time.monotonic() > deadline:
                self.stopped = StopReason.TIME
            elif cap is not None and (self.spent is None or self.spent >= cap):
                self.stopped = StopReason.BUDGET
        return self.stopped is None


def run_items(items: Sequence[T], ask: Callable[[T], R], *, max_workers: int,
              cost_of: Callable[[R], float | None], limits: RunLimits | None = None,
              progress: Callable[[R], None] | None = None) -> ItemBatch[R]:
    """``ask`` over ``items`` on up to ``max_workers`` threads, in order, under ``limits``.

    Args:
        items: What to ask about; started in this order.
        ask: One item's work (runs in a worker thread, in a copy of the caller's context).
        max_workers: Items running at once (>= 1).
        cost_of: What a result counts against the cost cap (USD; None = unknown).
        limits: Deadline, cost cap and earlier spend (default: none).
        progress: Called with each result as its item finishes, from the calling thread.

    Returns:
        The results of the started items in item order, why the rest were not started, and the
        spend.

    Raises:
        ValueError: ``max_workers`` is below 1.
    """
    if max_workers < 1:
        raise ValueError(f"max_workers must be >= 1, got {max_workers}")
    meter = _Meter(limits or RunLimits())
    finished: dict[int, R] = {}
    running: dict[Future[R], int] = {}
    started = 0
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(items))),
                            thread_name_prefix="item") as pool:
        try:
            while True:
                while started < len(items) and len(running) < max_workers \
                        and meter.may_start():
                    context = contextvars.copy_context()
                    running[pool.submit(context.run, ask, items[started])] = started
                    started += 1
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    index = running.pop(future)
                    finished[index] = result = future.result()
                    meter.add(cost_of(result))
                    if progress is not None:
                        progress(result)
        except BaseException:
            for future in running:
                future.cancel()
            raise
    return ItemBatch([finished[i] for i in range(started)], meter.stopped, meter.spent)
