"""Stratified allocation and seeded sampling, hand-computed."""

from __future__ import annotations

from datetime import date

import pytest

from tasks_lib.qa.types import Exemplar, PublicQAItem, QAReference
from tasks_lib.rotation import Candidate, StratumField, allocate, draw, quarter_seed, stratum_of


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


def _candidates() -> list[Candidate]:
    out = []
    for ds, meta, n in [("medqa", "step1", 6), ("medqa", "step2&3", 2), ("pubmedqa", None, 4)]:
        for i in range(n):
            idx = f"{meta}-{i}"
            item = PublicQAItem(dataset=ds, realidx=idx, question=f"q {ds} {idx}",
                                options={"A": "yes", "B": "no"}, meta_info=meta)
            ref = QAReference(dataset=ds, realidx=idx, answer_idx="A", answer="yes")
            out.append(Candidate(item, ref, stratum_of(item, [StratumField.DATASET,
                                                              StratumField.META_INFO])))
    return out


def test_draw_is_stratified_seeded_and_keeps_parent_order() -> None:
    cands = _candidates()
    ex = [Exemplar(dataset="medqa", question="e", options={"A": "a"}, answer_idx="A")]
    first = draw(cands, ex, 6, seed=1)
    # strata 2 (step2&3), 4 (pubmedqa), 6 (step1): 6//3=2 → 2; 4//2=2; 2 → {2, 2, 2}
    assert first.strata == {"medqa/step1": 2, "medqa/step2&3": 2, "pubmedqa/-": 2}
    assert first.strata_available == {"medqa/step1": 6, "medqa/step2&3": 2, "pubmedqa/-": 4}
    order = [c.item.realidx for c in cands]
    picked = [it.realidx for it in first.items]
    assert picked == sorted(picked, key=order.index)
    assert [r.realidx for r in first.references] == picked
    again = draw(cands, ex, 6, seed=1)
    assert again == first
    others = {tuple(it.realidx for it in draw(cands, ex, 6, seed=s).items) for s in range(8)}
    assert len(others) > 1  # the seed matters
    assert first.exemplars == ex


def test_dataset_only_strata() -> None:
    item = PublicQAItem(dataset="medqa", realidx="1", question="q", options={"A": "a"},
                        meta_info="step1")
    assert stratum_of(item, [StratumField.DATASET]) == "medqa"
    assert stratum_of(item, [StratumField.META_INFO]) == "step1"
