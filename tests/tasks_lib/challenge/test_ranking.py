"""The shared ranking function: hand-computed edge cases and every real leaderboard."""

from __future__ import annotations

import math
from fractions import Fraction

import pandas as pd
import pytest

from evaluators.metrics import Direction
from evaluators.ranking import (
    MetricColumn,
    MissingMetricError,
    RankingInputError,
    benchmark_rank,
    position,
    rank_challenge,
)
from tasks_lib.challenge.card import list_challenges, load_challenge
from tasks_lib.challenge.leaderboard import leaderboard_path, load_leaderboard

HUMANS = (0.9, 0.8, 0.8, 0.7)


@pytest.mark.parametrize(("value", "expected"), [
    (0.95, 1),  # better than everyone
    (0.9, 1),   # tie with the best shares position 1
    (0.85, 2),
    (0.8, 2),   # tie with two rows: smallest position of the tied group
    (0.75, 4),
    (0.7, 4),   # tie with the worst
    (0.1, 5),   # worse than everyone: N + 1
])
def test_position_higher_is_better(value: float, expected: int) -> None:
    assert position(value, HUMANS, Direction.HIGHER) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (0.6, 1), (0.7, 1), (0.75, 2), (0.8, 2), (0.85, 4), (0.9, 4), (2.0, 5),
    (math.inf, 5), (-math.inf, 1),
])
def test_position_lower_is_better(value: float, expected: int) -> None:
    assert position(value, HUMANS, Direction.LOWER) == expected


def test_nan_is_rejected() -> None:
    with pytest.raises(RankingInputError, match="NaN"):
        position(math.nan, HUMANS, Direction.HIGHER)


COLUMNS = [MetricColumn("dice", Direction.HIGHER, HUMANS),
           MetricColumn("hd95", Direction.LOWER, (2.0, 3.0, 3.0, 9.0))]


def test_mean_rank_and_percentile_are_exact() -> None:
    rank = rank_challenge("toy", COLUMNS, {"dice": 0.8, "hd95": 10.0})
    assert rank.positions == {"dice": 2, "hd95": 5}
    assert rank.mean_rank == Fraction(7, 2)
    assert rank.percentile == Fraction(3, 8)  # 1 - (3.5 - 1) / 4
    assert rank.n_competitors == 4 and not rank.failed


def test_best_and_worst_possible() -> None:
    best = rank_challenge("toy", COLUMNS, {"dice": 1.0, "hd95": 0.0})
    worst = rank_challenge("toy", COLUMNS, {"dice": 0.0, "hd95": 99.0})
    assert (best.mean_rank, best.percentile) == (1, 1)
    assert (worst.mean_rank, worst.percentile) == (5, 0)


def test_failed_submission_gets_zero() -> None:
    rank = rank_challenge("toy", COLUMNS, None)
    assert rank.failed and rank.percentile == 0 and rank.mean_rank is None and not rank.positions


def test_missing_metric_names_the_known_metrics() -> None:
    with pytest.raises(MissingMetricError) as info:
        rank_challenge("toy", COLUMNS, {"dice": 0.8})
    message = str(info.value)
    assert "missing metric(s) hd95" in message and "known metrics: dice, hd95" in message


def test_unknown_metric_is_an_error_too() -> None:
    with pytest.raises(MissingMetricError, match="unknown metric\\(s\\) dsc"):
        rank_challenge("toy", COLUMNS, {"dice": 0.8, "hd95": 1.0, "dsc": 0.5})


def test_benchmark_rank_counts_failures_as_zero() -> None:
    ranks = [rank_challenge("a", COLUMNS, {"dice": 0.8, "hd95": 10.0}),
             rank_challenge("b", COLUMNS, None),
             rank_challenge("c", COLUMNS, {"dice": 1.0, "hd95": 0.0})]
    assert benchmark_rank(ranks) == (Fraction(3, 8) + 0 + 1) / 3


def test_benchmark_rank_rejects_duplicates_and_empty() -> None:
    rank = rank_challenge("a", COLUMNS, None)
    with pytest.raises(RankingInputError, match="more than once"):
        benchmark_rank([rank, rank])
    with pytest.raises(RankingInputError, match="at least one"):
        benchmark_rank([])


def test_percentile_pct_is_half_up() -> None:
    columns = [MetricColumn("a", Direction.HIGHER, (9, 8, 7, 6, 5, 4, 3, 2)),
               MetricColumn("b", Direction.HIGHER, (9, 8, 7, 6, 5, 4, 3, 2))]
    rank = rank_challenge("toy", columns, {"a": 8.5, "b": 7.5})  # positions 2 and 3
    assert rank.percentile == Fraction(13, 16) and rank.percentile_pct == 81.3


@pytest.mark.parametrize("challenge", list_challenges())
def test_reproduces_every_human_position(challenge: str) -> None:
    """Each human row placed among all rows gets its published ``<metric>_position``."""
    card = load_challenge(challenge)
    columns = load_leaderboard(card)
    frame = pd.read_csv(leaderboard_path(card))
    for column in columns:
        published = frame[f"{column.name}_position"].tolist()
        ours = [position(v, column.human_values, column.direction) for v in column.human_values]
        assert ours == published, column.name
    means = [sum(position(frame.at[i, c.name], c.human_values, c.direction) for c in columns)
             / len(columns) for i in range(len(frame))]
    assert means == pytest.approx(frame["mean_position"].tolist(), abs=0.006)
