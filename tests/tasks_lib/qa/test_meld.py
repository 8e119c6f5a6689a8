"""MELD contamination screen: a model that memorised some questions is caught on exactly those."""

from __future__ import annotations

import json

import pytest

from tasks_lib.qa.meld import screen, similarity, split_at_middle_token
from tasks_lib.qa.types import QAItem


def test_similarity_hand_computed() -> None:
    assert similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)
    assert similarity("  abc ", "abc") == 1.0
    assert similarity("", "") == 1.0
    assert similarity("abc", "") == 0.0


def test_split_at_middle_token_round_trips() -> None:
    text = "A 45-year-old woman presents with fatigue and weight gain over six months."
    first, second, n = split_at_middle_token(text)
    assert first + second == text and n > 0 and first and second


def test_flags_exactly_the_memorised_items() -> None:
    from support.paths import QA_SOURCE
    from support.qa_fakes import MemorisingModel

    lines = (QA_SOURCE / "questions" / "medqa.test.jsonl").read_text().splitlines()[:12]
    items = []
    for n, line in enumerate(lines, 1):
        raw = json.loads(line)
        items.append(QAItem(dataset="medqa", realidx=str(raw["realidx"]), question=raw["question"],
                            options=raw["options"], answer_idx=raw["answer_idx"],
                            answer=raw["answer"], line=n))
    memorised = [items[2], items[7]]
    model = MemorisingModel(memorised)
    records = screen(items, ["m1", "m2"], model, threshold=0.95)
    assert len(records) == 24
    flagged = {r.key for r in records if r.flagged}
    assert flagged == {it.key for it in memorised}
    assert all(r.similarity == 1.0 for r in records if r.flagged)
    assert max(r.similarity for r in records if not r.flagged) < 0.5
    expected_max = [split_at_middle_token(it.question)[2] for it in items]
    assert [mt for _, mt in model.calls[::2]] == expected_max
