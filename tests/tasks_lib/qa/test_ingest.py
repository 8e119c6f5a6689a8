"""Ingest and normalize: bad lines are rejected with file, line and reason; nothing is dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluators.registry import UnknownNameError
from tasks_lib.domain import Track
from tasks_lib.errors import InputDataError
from tasks_lib.qa.ingest import normalize_item, read_questions
from tasks_lib.qa.types import QAItem, Reject
from tasks_lib.taskspec import list_cards, load_card

GOOD = {"realidx": 7, "question": "  Which drug?  ", "options": {"A": " Aspirin ", "B": "Heparin"},
        "answer_idx": "B", "answer": "Heparin", "meta_info": "step1"}


def _write(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_bad_lines_become_rejects_with_line_numbers(tmp_path: Path) -> None:
    lines = [
        json.dumps(GOOD),
        "{not json",
        json.dumps({**GOOD, "realidx": 8, "options": {}}),
        json.dumps({**GOOD, "realidx": 9, "answer_idx": "E"}),
        json.dumps(GOOD),
        "[1, 2]",
    ]
    source = _write(tmp_path, lines)
    got = read_questions("demo", source)
    assert got.n_lines == 6
    assert [it.realidx for it in got.items] == ["7", "9"]
    reasons = {r.line: r.reason for r in got.rejects}
    assert reasons[2].startswith("malformed JSON")
    assert "missing field(s): options" in reasons[3]
    assert reasons[5] == "duplicate realidx"
    assert reasons[6] == "line is not a JSON object"
    assert all(r.source == source and r.step == "ingest" for r in got.rejects)
    assert len(got.items) + len(got.rejects) == got.n_lines

    normalized = [normalize_item(it, source) for it in got.items]
    assert isinstance(normalized[0], QAItem)
    assert normalized[0].question == "Which drug?" and normalized[0].options["A"] == "Aspirin"
    assert isinstance(normalized[1], Reject) and normalized[1].line == 4
    assert "answer_idx 'E' is not one of the options" in normalized[1].reason


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match=r"nope\.jsonl: question file not found"):
        read_questions("demo", str(tmp_path / "nope.jsonl"))


def test_unknown_card_lists_known_cards() -> None:
    with pytest.raises(UnknownNameError) as err:
        load_card(Track.QA, "medqa-typo")
    assert "medqa" in str(err.value) and "pubmedqa" in str(err.value)


def test_all_nine_cards_load_and_read_real_data() -> None:
    from support.paths import QA_SOURCE

    from tasks_lib.taskspec import resolve_data_path

    cards = list_cards(Track.QA)
    assert len(cards) == 9
    for task_id in cards:
        card = load_card(Track.QA, task_id)
        got = read_questions(task_id, resolve_data_path(card.source.questions, str(QA_SOURCE)))
        assert got.items and not got.rejects, task_id
