"""The one leaderboard-relative ranking function (ReX-MLE), shared by every challenge.

Conventions, stated once:

* **Position** of the agent on one metric = 1 + the number of human rows *strictly* better than
  the agent's value, given the metric's direction. Ties share the better position (the agent gets
  the smallest position of its tied group); the worst possible position is ``N + 1`` with ``N``
  human rows. Values are compared exactly as given (no rounding to the leaderboard's precision).
  The public leaderboards' own ``<metric>_position`` columns follow the same rule.
* **Mean rank** = the unrounded mean of the agent's positions over the challenge's metrics.
* **Percentile** = ``1 − (mean rank − 1) / N``, in ``[0, 1]``; a failed or invalid submission
  gets ``0``.
* **Benchmark rank** = the mean of the per-challenge percentiles over every challenge attempted,
  failures included as ``0``.
* Percentages are reported rounded **half-up** to one decimal
  (:func:`evaluators.rounding.round_half_up`).

Arithmetic is exact (:class:`fractions.Fraction`) so that half-up rounding of a percentage never
depends on binary floating-point error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from evaluators.metrics import Direction
from evaluators.rounding import round_half_up


class RankingInputError(ValueError):
    """The values given for ranking are unusable (NaN, duplicated challenge, wrong metrics)."""


class MissingMetricError(RankingInputError):
    """The agent's metrics do not match the challenge's metrics (missing or unknown names)."""

    def __init__(self, challenge: str, missing: list[str], unknown: list[str], known: list[str]):
        parts = []
        if missing:
            parts.append(f"missing metric(s) {', '.join(missing)}")
        if unknown:
            parts.append(f"unknown metric(s) {', '.join(unknown)}")
        self.missing, self.unknown, self.known = missing, unknown, known
        super().__init__(
            f"challenge {challenge!r}: {'; '.join(parts)}; known metrics: {', '.join(known)}"
        )


@dataclass(frozen=True)
class MetricColumn:
    """One ranked metric of a leaderboard.

    Attributes:
        name: the leaderboard column name.
        direction: whether higher or lower values are better.
        human_values: the value of every human row (one per row, ``N`` in all).
    """

    name: str
    direction: Direction
    human_values: tuple[float, ...]


@dataclass(frozen=True)
class ChallengeRank:
    """Where an agent's submission lands on one challenge's human leaderboard.

    Attributes:
        challenge: challenge id.
        n_competitors: ``N``, the number of human rows.
        positions: metric → position in ``1..N+1`` (empty for a failed submission).
        mean_rank: exact mean position (``None`` for a failed submission).
        percentile: exact percentile in ``[0, 1]`` (``0`` for a failed submission).
        failed: the submission failed or was invalid.
    """

    challenge: str
    n_competitors: int
    positions: Mapping[str, int]
    mean_rank: Fraction | None
    percentile: Fraction
    failed: bool = False

    @property
    def percentile_pct(self) -> float:
        """Percentile as a percentage rounded half-up to one decimal."""
        return round_half_up(self.percentile * 100, 1)


def position(value: float, human_values: Sequence[float], direction: Direction) -> int:
    """Position of ``value`` among ``human_values`` (ties take the better position).

    Raises:
        RankingInputError: ``value`` is NaN (rank a failed metric as a failed submission).
    """
    if math.isnan(value):
        raise RankingInputError("metric value is NaN; rank a failed submission as failed instead")
    if direction is Direction.HIGHER:
        better = sum(1 for h in human_values if h > value)
    else:
        better = sum(1 for h in human_values if h < value)
    return better + 1


def rank_challenge(
    challenge: str, columns: Sequence[MetricColumn], agent: Mapping[str, float] | None
) -> ChallengeRank:
    """Place an agent's metric values on a challenge leaderboard.

    Args:
        challenge: challenge id (for messages and the result).
        columns: every ranked metric of the challenge, each with all ``N`` human values.
        agent: metric name → the agent's value; ``None`` means the submission failed.

    Raises:
        MissingMetricError: ``agent`` lacks a ranked metric or names one the challenge lacks.
        ValueError: the columns disagree on ``N`` or there are no columns or no human rows.
    """
    if not columns:
        raise ValueError(f"challenge {challenge!r} has no ranked metrics")
    sizes = {len(c.human_values) for c in columns}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"challenge {challenge!r}: metric columns have row counts {sorted(sizes)}")
    n = sizes.pop()
    if agent is None:
        return ChallengeRank(challenge, n, {}, None, Fraction(0), failed=True)
    known = [c.name for c in columns]
    missing = [name for name in known if name not in agent]
    unknown = sorted(set(agent) - set(known))
    if missing or unknown:
        raise MissingMetricError(challenge, missing, unknown, known)
    positions = {c.name: position(agent[c.name], c.human_values, c.direction) for c in columns}
    mean = Fraction(sum(positions.values()), len(positions))
    return ChallengeRank(challenge, n, positions, mean, 1 - (mean - 1) / n)


def benchmark_rank(ranks: Sequence[ChallengeRank]) -> Fraction:
    """Mean percentile over every attempted challenge (failures count ``0``).

    Raises:
        RankingInputError: ``ranks`` is empty or names a challenge twice.
    """
    if not ranks:
        raise RankingInputError("benchmark rank needs at least one challenge result")
    seen: set[str] = set()
    for r in ranks:
        if r.challenge in seen:
            raise RankingInputError(f"challenge {r.challenge!r} appears more than once")
        seen.add(r.challenge)
    return sum((r.percentile for r in ranks), Fraction(0)) / len(ranks)
