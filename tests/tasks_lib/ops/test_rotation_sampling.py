"""Stratified allocation and seeded sampling, hand-computed."""

from __future__ import annotations

from datetime import date

import pytest

from tasks_lib.rotation.sampling import allocate, draw, quarter_seed, rank, stratum_of
from tasks_lib.rotation.types import Unit


def test_small_strata_whole_large_ones_equal_shares() -> None:
    # order by size: a(2) share 20//3=6 → 2; b(10) share 18//2=9 → 9; c(50) share 9 → 9
    assert allocate({"a": 2, "b": 10, "c": 50}, 20) == {"a": 2, "b": 9, "c": 9}


def test_remainder_goes_to_the_last_share_and_sum_is_exact() -> None:
    # x: 10//3=3 (rem 7), y: 7//2=3 (rem 4), z: 4
    assert allocate({"x": 10, "y": 10, "z": 10}, 10) == {"x": 3, "y": 3, "z": 4}
    # a: 6//3=2 but only 1 exists (rem 5); b: 5//2=2 (rem 3); c: 3
    assert allocate({"a": 1, "b": 3, "c": 9}, 6) == {"a": 1, "b": 2, "c": 3}


def test_size_beyond_total_takes_everything_and_zero_takes_nothing() -> None:
    assert allocate({"a": 2, "b": 3}, 99) == {"a": 2, "b": 3}
    assert allocate({"a": 2, "b": 3}, 0) == {"a": 0, "b": 0}
    with pytest.raises(ValueError):
        allocate({"a": 1}, -1)


def test_quarter_seed() -> None:
    assert quarter_seed(date(2027, 1, 1)) == 20271
    assert quarter_seed(date(2026, 11, 22)) == 20264
    assert quarter_seed(date(2026, 6, 30)) == 20262


def _units() -> list[Unit]:
    return [Unit(f"{ds}/{meta}-{i}", {"dataset": ds, "meta_info": meta})
            for ds, meta, n in [("medqa", "step1", 6), ("medqa", "step2&3", 2),
                                ("pubmedqa", "-", 4)]
            for i in range(n)]


def test_draw_is_stratified_and_seeded() -> None:
    units = _units()
    first = draw(units, ["dataset", "meta_info"], 6, seed=1)
    # strata 2 (step2&3), 4 (pubmedqa), 6 (step1): 6//3=2 → 2; 4//2=2; 2 → {2, 2, 2}
    assert first.strata == {"medqa/step1": 2, "medqa/step2&3": 2, "pubmedqa/-": 2}
    assert first.strata_available == {"medqa/step1": 6, "medqa/step2&3": 2, "pubmedqa/-": 4}
    assert len(first.keys) == 6 and {"medqa/step2&3-0", "medqa/step2&3-1"} <= first.keys
    # inside a stratum the order is sha256(seed:key): the two lowest ranks of step1 are drawn
    step1 = sorted((u.key for u in units if u.strata["meta_info"] == "step1"),
                   key=lambda k: rank(1, k))
    assert set(step1[:2]) <= first.keys and not set(step1[2:]) & first.keys
    assert draw(units, ["dataset", "meta_info"], 6, seed=1) == first
    others = {draw(units, ["dataset", "meta_info"], 6, seed=s).keys for s in range(8)}
    assert len(others) > 1  # the seed matters


def test_strata_follow_the_chosen_fields_and_duplicates_count_once() -> None:
    units = _units()
    assert draw(units, ["dataset"], 99, 0).strata == {"medqa": 8, "pubmedqa": 4}
    assert draw(units, [], 3, 0).strata == {"all": 3}
    assert stratum_of(units[0], ["meta_info"]) == "step1"
    assert draw([*units, *units], [], 99, 0).strata_available == {"all": 12}
