"""The Dask scoring task itself, hand-computed (the cluster test is in test_dask_scheduler)."""

from __future__ import annotations

import pytest

from evaluators.qa import exact_match
from tasks_lib.compute import mean_metric


def test_mean_metric_is_the_mean_of_item_values() -> None:
    assert mean_metric(exact_match, ["A", "B", None, "d"], ["A", "C", "B", "D"]) == 0.25


def test_mean_metric_rejects_unpaired_or_empty_input() -> None:
    with pytest.raises(ValueError, match="2 predictions for 1 references"):
        mean_metric(exact_match, ["A", "B"], ["A"])
    with pytest.raises(ValueError, match="no items"):
        mean_metric(exact_match, [], [])
