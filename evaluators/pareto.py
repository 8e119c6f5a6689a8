"""Cost–performance Pareto frontier (pure)."""

from __future__ import annotations

from collections.abc import Sequence


def pareto_frontier(costs: Sequence[float | None], scores: Sequence[float]) -> list[bool]:
    """Flag the points no other point dominates.

    A point dominates another when it is cheaper-or-equal *and* better-or-equal, one strictly.

    Points with unknown cost (``None``) are never on the frontier and never dominate.

    Args:
        costs: cost per point (lower is better).
        scores: score per point (higher is better).

    Returns:
        One flag per point, ``True`` for frontier members.
    """
    if len(costs) != len(scores):
        raise ValueError("costs and scores must have the same length")
    flags: list[bool] = []
    for i, (ci, si) in enumerate(zip(costs, scores, strict=True)):
        if ci is None:
            flags.append(False)
            continue
        dominated = any(
            cj is not None and cj <= ci and sj >= si and (cj < ci or sj > si)
            for j, (cj, sj) in enumerate(zip(costs, scores, strict=True))
            if j != i
        )
        flags.append(not dominated)
    return flags
