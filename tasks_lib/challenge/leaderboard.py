"""Read a challenge's human leaderboard (``leaderboard.csv``) into ranking columns.

Metric columns are every column except ``rank``, ``team``, ``mean_position`` and the
``<metric>_position`` columns; they must match the card's metrics exactly, so a stale card or a
changed file fails loudly instead of ranking against the wrong columns.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from evaluators.ranking import MetricColumn
from tasks_lib.challenge.card import challenge_source
from tasks_lib.errors import InputDataError
from tasks_lib.settings import get_settings
from tasks_lib.taskspec import TaskSpec

_BOOKKEEPING = {"rank", "team", "mean_position"}


def leaderboard_path(card: TaskSpec) -> Path:
    """Absolute path of the card's leaderboard file (resolved against the data root)."""
    return get_settings().data_root / challenge_source(card).leaderboard


def metric_columns_of(frame: pd.DataFrame) -> list[str]:
    """Metric column names of a leaderboard table, in file order."""
    return [c for c in frame.columns if c not in _BOOKKEEPING and not c.endswith("_position")]


def load_leaderboard(card: TaskSpec) -> list[MetricColumn]:
    """The card's ranked metrics (its leaderboard columns) with every human value, in card order.

    A card may list graded metrics the leaderboard does not report: they are computed and shown
    on the score card but not ranked.

    Raises:
        InputDataError: the file is missing, its metric columns differ from the card's, or a
            value is missing or not a finite number.
    """
    path = leaderboard_path(card)
    if not path.is_file():
        raise InputDataError(str(path), "leaderboard file not found (check MEDFLOWS_DATA_ROOT)")
    frame = pd.read_csv(path)
    found = metric_columns_of(frame)
    ranked = [m for m in card.metrics if m.name in found]
    stale = [m.name for m in card.metrics if m.evaluator is None and m.name not in found]
    if sorted(found) != sorted(m.name for m in ranked) or stale:
        raise InputDataError(
            str(path), f"metric columns {found} differ from card metrics {card.metric_names}"
        )
    columns = []
    for metric in ranked:
        values = pd.to_numeric(frame[metric.name], errors="coerce").tolist()
        bad = [i + 2 for i, v in enumerate(values) if not math.isfinite(v)]
        if bad:
            raise InputDataError(str(path), f"column {metric.name!r} is not numeric", line=bad[0])
        columns.append(MetricColumn(metric.name, metric.resolved_direction,
                                    tuple(float(v) for v in values)))
    return columns
