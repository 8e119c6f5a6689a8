"""Difficulty filter: strict k/N < 0.5, first-prediction rule, selection rules, real data."""

from __future__ import annotations

import pandas as pd
import pytest

from tasks_lib.domain import SelectionRule
from tasks_lib.errors import InputDataError
from tasks_lib.qa.difficulty import count_correct, select_hard
from tasks_lib.qa.predictions import load_predictions
from tasks_lib.qa.types import QAItem


def _item(i: int, meta: str = "x") -> QAItem:
    return QAItem(dataset="d", realidx=str(i), question=f"q{i}", options={"A": "a", "B": "b"},
                  answer_idx="A", answer="a", meta_info=meta, line=i + 1)


def _preds(rows: list[tuple[int, str, str]]) -> pd.DataFrame:
    return pd.DataFrame([{"dataset": "d", "model": m, "method": "zero_shot", "realidx": str(i),
                          "predicted_answer": p} for i, m, p in rows])


def test_k_over_n_is_strict_and_first_prediction_wins() -> None:
    items = [_item(0), _item(1), _item(2)]
    rows = []
    for m in range(10):  # item 0: 5/10 correct (easy); item 1: 4/10 (hard)
        rows.append((0, f"m{m}", "A" if m < 5 else "B"))
        rows.append((1, f"m{m}", "A" if m < 4 else "B"))
    rows += [(2, "m0", "B"), (2, "m0", "A")]  # duplicated row: the first (wrong) one counts
    counts = count_correct(items, _preds(rows))
    assert counts == {"d/0": (5, 10), "d/1": (4, 10), "d/2": (0, 1)}
    out = select_hard(items, counts, rule=SelectionRule.FIRST, per_dataset=10)
    assert [(d.realidx, d.hard, d.selected) for d in out] == [
        ("0", False, False), ("1", True, True), ("2", True, True)]


def test_item_without_predictions_is_not_hard() -> None:
    counts = count_correct([_item(0)], _preds([]).reindex(
        columns=["dataset", "model", "method", "realidx", "predicted_answer"]))
    assert counts == {"d/0": (0, 0)}
    assert not select_hard([_item(0)], counts, rule=SelectionRule.FIRST, per_dataset=5)[0].hard


def test_first_takes_source_order_and_stratified_is_seeded() -> None:
    items = [_item(i, meta="s1" if i < 30 else "s2") for i in range(40)]
    counts = {it.key: (0, 3) for it in items}
    first = select_hard(items, counts, rule=SelectionRule.FIRST, per_dataset=5)
    assert [d.realidx for d in first if d.selected] == ["0", "1", "2", "3", "4"]
    a = select_hard(items, counts, rule=SelectionRule.STRATIFIED, per_dataset=8, seed=3)
    b = select_hard(items, counts, rule=SelectionRule.STRATIFIED, per_dataset=8, seed=3)
    c = select_hard(items, counts, rule=SelectionRule.STRATIFIED, per_dataset=8, seed=4)
    chosen = [d.realidx for d in a if d.selected]
    assert chosen == [d.realidx for d in b if d.selected]
    assert chosen != [d.realidx for d in c if d.selected]
    assert sum(int(r) < 30 for r in chosen) == 6 and sum(int(r) >= 30 for r in chosen) == 2


def test_reproduces_published_hard_subset() -> None:
    """The first-protocol selection with the 10 models equals MedAgentsBench's HARD items."""
    from support.paths import QA_SOURCE

    from flows.pipeline import HARD_MODELS
    from tasks_lib.qa.ingest import normalize_item, read_questions

    full = load_predictions(str(QA_SOURCE / "predictions" / "full.csv.gz"), HARD_MODELS)
    hard = load_predictions(str(QA_SOURCE / "predictions" / "hard.csv.gz"))
    total = 0
    for ds in ["medqa", "medbullets", "mmlu", "medxpertqa-u"]:
        path = str(QA_SOURCE / "questions" / f"{ds}.test.jsonl")
        items = [normalize_item(it, path) for it in read_questions(ds, path).items]
        items = [it for it in items if isinstance(it, QAItem)]
        counts = count_correct(items, full[full["dataset"] == ds])
        chosen = [d.realidx for d in select_hard(items, counts, rule=SelectionRule.FIRST,
                                                  per_dataset=100) if d.selected]
        published = set(hard.loc[hard["dataset"] == ds, "realidx"])
        assert set(chosen) == published, ds
        total += len(chosen)
    assert total == 100 + 89 + 73 + 100


def test_prediction_file_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputDataError, match="empty"):
        load_predictions(str(empty))
    header = tmp_path / "header.csv"
    header.write_text("dataset,split,model,method,realidx,predicted_answer,prompt_tokens,"
                      "completion_tokens,time_s,cost_usd\n")
    with pytest.raises(InputDataError, match="no rows"):
        load_predictions(str(header))
    bad = tmp_path / "bad.csv"
    bad.write_text("dataset,model\nmedqa,x\n")
    with pytest.raises(InputDataError, match="missing column"):
        load_predictions(str(bad))
    with pytest.raises(InputDataError, match="not found"):
        load_predictions(str(tmp_path / "none.csv"))
    good = tmp_path / "good.csv"
    good.write_text(header.read_text() + "medqa,full,m1,zero_shot,0,A,1,1,1,\n")
    with pytest.raises(InputDataError, match="no predictions for model"):
        load_predictions(str(good), ["m2"])
