"""Hand-computed cases for the QA answer extractor, exact match and the Pareto frontier."""

from __future__ import annotations

import pytest

from evaluators.metrics import METRICS, Direction
from evaluators.pareto import pareto_frontier
from evaluators.qa import exact_match, extract_answer
from evaluators.registry import Registry, UnknownNameError

OPTS = {"A": "Aspirin", "B": "Heparin", "C": "Warfarin", "D": "Clopidogrel"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("B", "B"),
        ("(c)", "C"),
        ("**D.**", "D"),
        ("The answer is (B).", "B"),
        ("Reasoning... answer: A\nOn reflection the final answer is C", "C"),
        ("\\boxed{D}", "D"),
        ("C) Warfarin because INR", "C"),
        ("I would give heparin here.", "B"),
        ("Either aspirin or heparin.", None),
        ("The answer is (E).", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_answer(text: str | None, expected: str | None) -> None:
    assert extract_answer(text, OPTS) == expected


def test_exact_match_is_exact_and_registered_with_conventions() -> None:
    assert exact_match("B", "B") == 1.0
    assert exact_match("b", "B") == 0.0
    assert exact_match(None, "B") == 0.0
    spec = METRICS.get("exact_match")
    assert spec.direction is Direction.HIGHER and spec.missing == 0.0
    assert spec("A", "A") == 1.0


def test_pareto_frontier_hand_computed() -> None:
    costs = [1.0, 2.0, 0.5, 3.0, None, 2.0]
    scores = [0.5, 0.7, 0.4, 0.6, 0.9, 0.7]
    # (3.0, 0.6) is dominated by (2.0, 0.7); unknown cost never on the frontier;
    # the two identical points (2.0, 0.7) do not dominate each other.
    assert pareto_frontier(costs, scores) == [True, True, True, False, False, True]


def test_registry_unknown_name_lists_known() -> None:
    reg: Registry[int] = Registry("widget")
    reg.add("one", 1)
    with pytest.raises(UnknownNameError, match="known widgets: one"):
        reg.get("two")
    with pytest.raises(ValueError, match="already registered"):
        reg.add("one", 2)
