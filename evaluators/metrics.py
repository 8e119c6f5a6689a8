"""The metric seam: a pure function plus its conventions, stated once, as data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from evaluators.registry import Registry


class Direction(StrEnum):
    """Whether a larger metric value is better."""

    HIGHER = "higher"
    LOWER = "lower"


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric: the function and the conventions every caller must follow.

    Attributes:
        name: registry name, used in task cards and score cards.
        fn: pure ``(prediction, reference, *conventions) -> float`` function (extra positional
            arguments such as voxel spacing are documented by the metric).
        direction: whether higher or lower values are better.
        averaging: how per-item values are aggregated into a task value (documentation + data).
        both_empty: the value when prediction and reference are both empty (``None`` = n/a).
        one_empty: the value when exactly one of them is empty (``None`` = n/a).
        missing: the value a missing or unreadable prediction gets.
        description: one line for docs and score cards.
    """

    name: str
    fn: Callable[..., float]
    direction: Direction
    averaging: str
    both_empty: float | None
    one_empty: float | None
    missing: float
    description: str

    def __call__(self, prediction: Any, reference: Any, *args: Any) -> float:
        return self.fn(prediction, reference, *args)


METRICS: Registry[MetricSpec] = Registry("metric")


def metric(
    name: str,
    *,
    direction: Direction,
    averaging: str,
    description: str,
    missing: float = 0.0,
    both_empty: float | None = None,
    one_empty: float | None = None,
) -> Callable[[Callable[..., float]], Callable[..., float]]:
    """Register a pure metric function with its conventions; returns the function unchanged."""

    def deco(fn: Callable[..., float]) -> Callable[..., float]:
        METRICS.add(
            name,
            MetricSpec(name, fn, direction, averaging, both_empty, one_empty, missing, description),
        )
        return fn

    return deco
