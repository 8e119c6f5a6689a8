"""Rolling-window limits, hand-computed."""

from __future__ import annotations

from tasks_lib.medbench.ratelimit import Event, Limit, LimitKind, check, wait_s

PER_MINUTE = Limit(LimitKind.ITEMS, 10, 60.0)


def test_fits_now_when_the_window_has_room() -> None:
    events = [Event(100.0, 4), Event(130.0, 3)]
    assert wait_s(events, PER_MINUTE, 3, now=150.0) == 0.0
    assert check(events, PER_MINUTE, 3, now=150.0) is None


def test_waits_until_enough_old_units_leave() -> None:
    events = [Event(130.0, 3), Event(100.0, 4), Event(140.0, 2)]
    # used 9; 5 more need 4 freed: the event at 100 leaves at 160 -> 10 s after 150
    assert wait_s(events, PER_MINUTE, 5, now=150.0) == 10.0
    # 8 more need 7 freed: events at 100 (4) and 130 (3) -> the later leaves at 190
    refusal = check(events, PER_MINUTE, 8, now=150.0)
    assert refusal is not None and refusal.retry_after_s == 40.0 and refusal.used == 9


def test_events_outside_the_window_do_not_count() -> None:
    assert wait_s([Event(80.0, 10)], PER_MINUTE, 10, now=140.0) == 0.0  # 80 + 60 = 140: left
    assert wait_s([Event(81.0, 10)], PER_MINUTE, 1, now=140.0) == 1.0


def test_a_request_larger_than_the_limit_never_fits() -> None:
    refusal = check([], PER_MINUTE, 11, now=0.0)
    assert refusal is not None and refusal.retry_after_s is None
