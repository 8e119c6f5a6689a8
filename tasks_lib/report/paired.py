"""Paired statistics on the one board (the maths is :mod:`evaluators.significance`): per row a
bootstrap interval of its task score over items, per adjacent ranked pair a paired test whose
p values are Holm-adjusted over the adjacent comparisons of each (task, tier) board, and the
full pairwise matrix of each board (Holm over all its pairs).

Per-item outcomes are the ``per_case`` values of the primary metric on the stored score cards
(``runs/<run_id>/scores/<evaluator version>.json``); the ledger's score rows carry only the
summary. The statistic is the task score itself: the plain mean over cases, or the macro mean
over the strata the card's ``groups`` name when case ids read ``<stratum>/<id>`` (QA: the
dataset). A card whose task score is neither (a dataset-level metric, a policy override, one
aggregated task → dimension → overall) gets no interval and no test, with that reason, rather
than an interval of some other number.

A row's outcomes come from its track's kit (:meth:`tasks_lib.tracks.base.TrackKit.
board_outcomes`; default :func:`row_outcomes`). A kit whose task score is not a weighted mean of
item outcomes returns its own :class:`BoardOutcomes` (MedBench: the overall of a pool, items
resampled within tasks and task → dimension → overall recomputed, a paired bootstrap test —
:mod:`tasks_lib.medbench.report_stats`, the numbers ``medflows report medbench`` prints).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from itertools import combinations, pairwise
from typing import TYPE_CHECKING, NamedTuple, Protocol, Self

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from evaluators.significance import (
    DEFAULT,
    Adjusted,
    PairedTest,
    SignificanceSettings,
    bootstrap_interval,
    holm,
    item_means,
    paired_test,
)
from tasks_lib.domain import Frozen
from tasks_lib.records import card_key, run_store

if TYPE_CHECKING:
    from tasks_lib.report.board import LeaderboardRow, Scored


class _Case(BaseModel):
    model_config = ConfigDict(extra="ignore")

    case_id: str
    values: dict[str, float]


class _Card(BaseModel):
    """What the statistics read of a stored score card (the rest is not validated again: a QA
    card has a row per item)."""

    model_config = ConfigDict(extra="ignore")

    primary_metric: str = ""
    task_score: float | None = None
    groups: dict[str, dict[str, float]] = {}
    per_case: list[_Case] = []


class BoardOutcomes(Protocol):
    """What the statistics need of one row's outcomes: its interval and a paired test against
    another row's outcomes of the same kind."""

    def interval(self, settings: SignificanceSettings) -> dict[str, object]:
        """The row's interval fields: ``ci_low``, ``ci_high``, ``n_items``, ``ci_reason``."""
        ...

    def compare(self, other: Self, settings: SignificanceSettings) -> PairedTest:
        """The paired test of this row (A) against ``other`` (B) on the items both have."""
        ...


def interval_fields(low: float | None, high: float | None, n_items: int | None,
                    reason: str | None) -> dict[str, object]:
    """A row's interval fields."""
    return {"ci_low": low, "ci_high": high, "n_items": n_items, "ci_reason": reason}


class Outcomes(NamedTuple):
    """One board row's per-item outcomes, items sorted by id: the task score is their weighted
    mean."""

    items: np.ndarray
    values: np.ndarray
    """Per item: the mean over the row's replicates."""
    weights: np.ndarray
    """Per item: its weight in the task score (see :mod:`evaluators.significance`)."""

    def interval(self, settings: SignificanceSettings) -> dict[str, object]:
        """Bootstrap interval of the weighted mean over items."""
        ci = bootstrap_interval(self.values, self.weights, settings)
        return interval_fields(ci.low, ci.high, ci.n_items, ci.reason)

    def compare(self, other: Self, settings: SignificanceSettings) -> PairedTest:
        """McNemar or paired permutation test on the items both rows have (weights: their
        mean)."""
        _, ia, ib = np.intersect1d(self.items, other.items, assume_unique=True,
                                   return_indices=True)
        return paired_test(self.values[ia], other.values[ib],
                           (self.weights[ia] + other.weights[ib]) / 2, settings)


Found = BoardOutcomes | str
"""A row's outcomes, or why it has none."""


class PairwiseCell(Frozen):
    """One pair of ranked rows of a (task, tier) board: a paired test of A against B."""

    task_id: str = Field(description="Task (or pool) id of the board.")
    tier: str = Field(description="Tier of the board.")
    agent_a: str = Field(description="The better-ranked agent.")
    agent_b: str = Field(description="The other agent.")
    rank_a: int = Field(description="Rank of A.")
    rank_b: int = Field(description="Rank of B.")
    n_pairs: int = Field(description="Items both agents have (the test's pairs).")
    difference: float | None = Field(description="A − B: weighted mean difference over the "
                                                 "paired items (task-score units).")
    test: str | None = Field(description="mcnemar-exact | paired-permutation (None: no test).")
    p_value: float | None = Field(description="Two-sided p value (None: no test).")
    p_adjusted: float | None = Field(description="Holm-adjusted over every pair of the board.")
    significant: bool | None = Field(description="Holm rejects at α (two-sided).")
    reason: str | None = Field(description="Why there is no test.")


def better_than_next(significant: bool | None, difference: float | None) -> bool:
    """The mark ``*``: Holm rejects the comparison with the next ranked row and this row is the
    better one on the paired items."""
    return bool(significant) and (difference or 0.0) > 0


def _weights(card: _Card, values: dict[str, float]) -> dict[str, float] | None:
    """Item weights under which the weighted mean of ``values`` is the card's task score: all
    equal, else the macro mean over the ``<stratum>/`` prefixes the card's groups name; None
    when neither gives the task score."""
    ids = list(values)
    strata = {i: i.split("/", 1)[0] for i in ids if "/" in i}
    candidates = [dict.fromkeys(ids, 1.0)]
    if card.groups and len(strata) == len(ids) and set(strata.values()) <= set(card.groups):
        sizes = Counter(strata.values())
        candidates.append({i: 1.0 / (len(sizes) * sizes[strata[i]]) for i in ids})
    for weights in candidates:
        mean = sum(weights[i] * values[i] for i in ids) / sum(weights.values())
        if math.isclose(mean, card.task_score or 0.0, rel_tol=1e-9, abs_tol=1e-9):
            return weights
    return None


class RunCases(NamedTuple):
    """One run's per-case primary values and their weights."""

    values: dict[str, float]
    weights: dict[str, float]


def run_cases(s: Scored) -> RunCases | str:
    """The per-case outcomes of one scored run from its stored score card, or why none."""
    key = card_key(s.score.evaluator_version)
    store = run_store(s.run.run_id)
    if not store.exists(key):
        return f"no stored score card ({s.run.run_id}/{key})"
    card = _Card.model_validate_json(store.read_text(key))
    metric = card.primary_metric
    values = {c.case_id: c.values[metric] for c in card.per_case if metric in c.values}
    if not values or len(values) < len(card.per_case):
        return f"the score card has no per-case {metric or 'primary metric'} values"
    weights = _weights(card, values)
    if weights is None:
        return (f"the task score is not a mean of the per-case {metric} values (a dataset-level "
                "metric or a scoring policy)")
    return RunCases(values, weights)


def row_outcomes(items: Sequence[Scored]) -> Found:
    """The outcomes of one board row: per item the mean over its replicates (a replicate
    without the item adds nothing to its mean)."""
    runs = [run_cases(s) for s in items]
    reasons = sorted({r for r in runs if isinstance(r, str)})
    if reasons:
        return "; ".join(reasons)
    found = [r for r in runs if isinstance(r, RunCases)]
    ids = sorted({i for r in found for i in r.values})
    matrix = np.array([[r.values.get(i, np.nan) for r in found] for i in ids], dtype=float)
    weights = np.array([next(r.weights[i] for r in found if i in r.weights) for i in ids])
    return Outcomes(np.array(ids), item_means(matrix), weights)


def compare(a: Found, b: Found, names: tuple[str, str],
            settings: SignificanceSettings = DEFAULT) -> PairedTest:
    """The paired test of A against B (:meth:`BoardOutcomes.compare`), or why none."""
    if isinstance(a, str) or isinstance(b, str):
        name, why = (names[0], a) if isinstance(a, str) else (names[1], b)
        return PairedTest(0, None, None, None, f"{name}: {why}")
    if type(a) is not type(b):
        return PairedTest(0, None, None, None, f"{names[0]} and {names[1]} have outcomes of "
                                               "different kinds (different tracks)")
    return a.compare(b, settings)


def _interval(found: Found, settings: SignificanceSettings) -> dict[str, object]:
    if isinstance(found, str):
        return interval_fields(None, None, None, found)
    return found.interval(settings)


class Pair(NamedTuple):
    """One tested pair of ranked agents (A ranked above B) and its adjusted p value."""

    a: str
    b: str
    test: PairedTest
    adjusted: Adjusted | None


class Statistics(NamedTuple):
    """The statistics of one ranked board."""

    fields: dict[str, dict[str, object]]
    """Agent → the interval fields (every agent with outcomes) and, for every ranked agent but
    the last, the fields of its test against the next ranked agent (the names of
    :class:`~tasks_lib.report.board.LeaderboardRow`)."""
    pairs: list[Pair]
    """Every pair of ranked agents, Holm over all of them (empty unless asked for)."""


def statistics(found: dict[str, Found], ranked: list[str], matrix: bool,
               settings: SignificanceSettings = DEFAULT) -> Statistics:
    """Intervals, adjacent tests (Holm over the adjacent comparisons) and, with ``matrix``,
    every pair of one board.

    Args:
        found: Agent → its outcomes (or why none), for every credited agent of the board.
        ranked: The ranked agents, best first.
        matrix: Also test every pair of ranked agents.
        settings: Interval and test settings.
    """
    tests: dict[tuple[str, str], PairedTest] = {}

    def test(a: str, b: str) -> PairedTest:
        if (a, b) not in tests:
            tests[(a, b)] = compare(found[a], found[b], (a, b), settings)
        return tests[(a, b)]

    fields = {a: _interval(f, settings) for a, f in found.items()}
    adjacent = list(pairwise(ranked))
    results = [test(a, b) for a, b in adjacent]
    for (a, b), t, adj in zip(adjacent, results, holm([t.p_value for t in results], settings),
                              strict=True):
        fields[a] |= {"vs_next_agent": b, "n_pairs": t.n_pairs, "paired_difference": t.difference,
                      "test": t.test, "p_value": t.p_value, "test_reason": t.reason,
                      "p_adjusted": adj.p_adjusted if adj else None,
                      "significant": adj.significant if adj else None}
    if not matrix:
        return Statistics(fields, [])
    every = list(combinations(ranked, 2))
    done = [test(a, b) for a, b in every]
    return Statistics(fields, [Pair(a, b, t, adj) for (a, b), t, adj in zip(
        every, done, holm([t.p_value for t in done], settings), strict=True)])


def cells(pairs: list[Pair], task_id: str, tier: str, ranks: dict[str, int]
          ) -> list[PairwiseCell]:
    """The pairs of one board as matrix cells."""
    return [PairwiseCell(task_id=task_id, tier=tier, agent_a=p.a, agent_b=p.b,
                         rank_a=ranks[p.a], rank_b=ranks[p.b], n_pairs=p.test.n_pairs,
                         difference=p.test.difference, test=p.test.test,
                         p_value=p.test.p_value,
                         p_adjusted=p.adjusted.p_adjusted if p.adjusted else None,
                         significant=p.adjusted.significant if p.adjusted else None,
                         reason=p.test.reason) for p in pairs]


def board_statistics(rows: list[LeaderboardRow], found: dict[str, Found],
                     matrix: bool, settings: SignificanceSettings = DEFAULT
                     ) -> tuple[list[LeaderboardRow], list[PairwiseCell]]:
    """One (task, tier) board, placed (ranked rows first, by rank), with its statistics: an
    interval on every credited row; on every ranked row but the last, the test against the next
    ranked row (Holm over the board's adjacent comparisons); and, with ``matrix``, every pair
    of ranked rows (Holm over all of them).

    Args:
        rows: The board's rows as :func:`tasks_lib.report.board.leaderboard` places them.
        found: Agent id → its row's outcomes (its kit's
            :meth:`~tasks_lib.tracks.base.TrackKit.board_outcomes`), for every row with a task
            score.
        matrix: Also compute the pairwise matrix.
        settings: Interval and test settings.
    """
    ranks = {r.agent_id: r.rank for r in rows if r.rank is not None}
    stats = statistics(found, list(ranks), matrix, settings)
    placed = [r.model_copy(update=stats.fields.get(r.agent_id, {})) for r in rows]
    if not rows:
        return placed, []
    return placed, cells(stats.pairs, rows[0].task_id, rows[0].tier, ranks)
