"""The one item-by-item runner (:mod:`tasks_lib.item_runner`) on real threads: results in item
order however the items finish, up to ``max_workers`` at once, the deadline and the cost cap stop
starting items (an unknown cost is never a 0), an exception starts nothing more and propagates
after the running items finish, progress comes from the calling thread once per item, and each
worker sees the caller's context variables (so a ``call_scope`` counts every item's calls)."""

from __future__ import annotations

import threading
import time
from contextvars import ContextVar

import pytest

from tasks_lib.item_runner import ItemBatch, RunLimits, StopReason, run_items
from tasks_lib.llm_scope import active_scope, call_scope


def _cost(result: float | None) -> float | None:
    return result


def test_results_come_back_in_item_order_when_items_finish_out_of_order() -> None:
    """All 8 items run at once and finish last-first (item i waits for item i + 1)."""
    finish_order: list[int] = []
    done = [threading.Event() for _ in range(9)]
    done[8].set()

    def ask(i: int) -> str:
        assert done[i + 1].wait(timeout=5)
        finish_order.append(i)
        done[i].set()
        return f"r{i}"

    batch = run_items(range(8), ask, max_workers=8, cost_of=lambda r: 0.0)
    assert batch == ItemBatch([f"r{i}" for i in range(8)], None, 0.0)
    assert finish_order == list(range(7, -1, -1))


def test_up_to_max_workers_items_run_at_once() -> None:
    in_flight, peak, lock = [0], [0], threading.Lock()
    together = threading.Barrier(3, timeout=5)  # breaks unless 3 items are in flight

    def ask(i: int) -> int:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        together.wait()
        with lock:
            in_flight[0] -= 1
        return i

    assert run_items(range(12), ask, max_workers=3, cost_of=lambda r: 0.0).results == list(
        range(12))
    assert peak[0] == 3


def test_a_passed_deadline_stops_starting_items_and_running_ones_finish() -> None:
    asked: list[int] = []

    def ask(i: int) -> int:
        asked.append(i)
        time.sleep(0.3)  # item 0 runs past the deadline
        return i

    limits = RunLimits(deadline=time.monotonic() + 0.15)
    batch = run_items(range(5), ask, max_workers=1, cost_of=lambda r: 0.0, limits=limits)
    assert batch == ItemBatch([0], StopReason.TIME, 0.0) and asked == [0]
    late = RunLimits(deadline=time.monotonic() - 1)
    assert run_items([1, 2], ask, max_workers=2, cost_of=lambda r: 0.0, limits=late) == \
        ItemBatch([], StopReason.TIME, 0.0)


def test_the_cost_cap_stops_starting_items_once_the_spend_reaches_it() -> None:
    """One worker, 1 USD per item, cap 2.5: items 0–2 start (the third below the cap), the
    spend is then 3.0 and nothing more starts. The earlier spend counts against the cap."""
    costs = [1.0] * 6
    batch = run_items(costs, lambda c: c, max_workers=1, cost_of=_cost,
                      limits=RunLimits(max_cost_usd=2.5))
    assert batch == ItemBatch([1.0, 1.0, 1.0], StopReason.BUDGET, 3.0)
    resumed = run_items(costs, lambda c: c, max_workers=1, cost_of=_cost,
                        limits=RunLimits(max_cost_usd=2.5, spent_usd=2.0))
    assert resumed == ItemBatch([1.0], StopReason.BUDGET, 3.0)
    assert run_items(costs, lambda c: c, max_workers=1, cost_of=_cost,
                     limits=RunLimits(max_cost_usd=10.0)) == ItemBatch(costs, None, 6.0)


def test_an_unknown_cost_makes_the_spend_unknown_and_stops_a_capped_run() -> None:
    costs: list[float | None] = [0.1, None, 0.1, 0.1]
    free = run_items(costs, lambda c: c, max_workers=1, cost_of=_cost)
    assert free == ItemBatch(costs, None, None)
    capped = run_items(costs, lambda c: c, max_workers=1, cost_of=_cost,
                       limits=RunLimits(max_cost_usd=100.0))
    assert capped == ItemBatch([0.1, None], StopReason.BUDGET, None)


def test_an_exception_starts_nothing_more_and_propagates_after_running_items_finish() -> None:
    asked: list[int] = []
    finished: list[int] = []
    lock = threading.Lock()

    def ask(i: int) -> int:
        with lock:
            asked.append(i)
        if i == 1:
            raise RuntimeError("bug in item 1")
        time.sleep(0.2)
        with lock:
            finished.append(i)
        return i

    with pytest.raises(RuntimeError, match="bug in item 1"):
        run_items(range(20), ask, max_workers=2, cost_of=lambda r: 0.0)
    assert sorted(asked) == [0, 1] and finished == [0]


def test_progress_is_called_once_per_finished_item_from_the_calling_thread() -> None:
    caller = threading.get_ident()
    workers: set[int] = set()
    reports: list[tuple[int, int]] = []

    def ask(i: int) -> int:
        workers.add(threading.get_ident())
        time.sleep(0.01 * (i % 3))
        return i

    batch = run_items(range(10), ask, max_workers=4, cost_of=lambda r: 0.0,
                      progress=lambda r: reports.append((r, threading.get_ident())))
    assert sorted(r for r, _ in reports) == batch.results == list(range(10))
    assert {thread for _, thread in reports} == {caller} and caller not in workers


def test_progress_is_not_called_for_unstarted_items() -> None:
    reports: list[float | None] = []
    run_items([1.0, 1.0, 1.0], lambda c: c, max_workers=1, cost_of=_cost,
              limits=RunLimits(max_cost_usd=1.0), progress=reports.append)
    assert reports == [1.0]


def test_workers_see_the_callers_context_and_do_not_leak_into_it() -> None:
    tag: ContextVar[str] = ContextVar("tag", default="unset")
    tag.set("caller")

    def ask(i: int) -> tuple[str, object]:
        seen = tag.get()
        tag.set(f"item {i}")
        return seen, active_scope()

    with call_scope("salt") as scope:
        batch = run_items(range(6), ask, max_workers=3, cost_of=lambda r: 0.0)
    assert batch.results == [("caller", scope)] * 6
    assert tag.get() == "caller"


def test_no_items_and_a_bad_worker_count() -> None:
    assert run_items([], lambda i: i, max_workers=4, cost_of=lambda r: 0.0) == \
        ItemBatch([], None, 0.0)
    with pytest.raises(ValueError, match="max_workers must be >= 1"):
        run_items([1], lambda i: i, max_workers=0, cost_of=lambda r: 0.0)
