"""The one rounding rule: half away from zero, on the number as written."""

from __future__ import annotations

from fractions import Fraction

import pytest

from evaluators.rounding import round_half_up


@pytest.mark.parametrize(("value", "digits", "expected"), [
    (81.25, 1, 81.3),   # Python's round() gives 81.2 (banker's rounding)
    (Fraction(1625, 20), 1, 81.3),
    (0.05, 1, 0.1),
    (2.675, 2, 2.68),   # rounded as written, not as its binary approximation
    (83.3333333, 1, 83.3),
    (41.65, 1, 41.7),
    (-0.25, 1, -0.3),
    (100.0, 1, 100.0),
])
def test_round_half_up(value: float | Fraction, digits: int, expected: float) -> None:
    assert round_half_up(value, digits) == expected


def test_round_half_up_to_an_integer() -> None:
    assert [round_half_up(x, 0) for x in (2.5, 3.5, 2.49, -2.5, 0.0)] == [3.0, 4.0, 2.0, -3.0, 0.0]
