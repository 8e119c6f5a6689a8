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
    assert reasons[5] == "duplicate realidx: '7' is also on line 1 (the first one is kept)"
    assert reasons[6] == "line is not a JSON object (got a list)"
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


def test_realidx_is_canonical_and_booleans_are_not_ids() -> None:
    from tasks_lib.qa.question_lines import canonical_realidx
    from tasks_lib.qa.types import QAInputLimits

    limits = QAInputLimits()
    assert {canonical_realidx(v, limits) for v in (1, 1.0, "1", "1.0", " 1 ", "1.00")} == {"1"}
    assert canonical_realidx("b64a9cd7-d076", limits) == "b64a9cd7-d076"
    assert canonical_realidx("Text-0", limits) == "Text-0"
    for bad, reason in ((True, "got a boolean"), (1.5, "not an integer"), ([1], "got a list"),
                        (None, "got null"), ("  ", "empty"), ("x" * 129, "max_id_chars")):
        with pytest.raises(ValueError, match=reason):
            canonical_realidx(bad, limits)


def test_limits_are_data(tmp_path: Path) -> None:
    """Custom limits change what is refused; each reason names the limit."""
    from tasks_lib.qa.types import QAInputLimits

    deep = {**GOOD, "realidx": 2, "meta_info": None, "answer": None}
    lines = [json.dumps(GOOD), json.dumps({**GOOD, "realidx": 1, "question": "q" * 60}),
             json.dumps(deep).replace('"answer": null', '"answer": null, "x": [[[1]]]'),
             json.dumps({**GOOD, "realidx": 3, "answer": "a" * 300})]
    source = _write(tmp_path, lines)
    defaults = read_questions("demo", source)
    assert [it.realidx for it in defaults.items] == ["7", "1", "3"]
    assert [(r.line, r.reason) for r in defaults.rejects] == [(3, "unknown field(s): x")]
    limits = QAInputLimits(max_line_bytes=250, max_field_chars=50, max_depth=2)
    got = read_questions("demo", source, limits)
    assert [it.realidx for it in got.items] == ["7"]
    reasons = {r.line: r.reason for r in got.rejects}
    assert "max_field_chars (50)" in reasons[2]
    assert "max_depth (2)" in reasons[3]
    assert "max_line_bytes (250 bytes)" in reasons[4]


def test_gzip_question_file_is_streamed_and_a_bomb_refused(tmp_path: Path) -> None:
    import gzip

    from tasks_lib.qa.types import QAInputLimits

    good = tmp_path / "q.jsonl.gz"
    good.write_bytes(gzip.compress((json.dumps(GOOD) + "\n").encode()))
    assert [it.realidx for it in read_questions("demo", str(good)).items] == ["7"]
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(json.dumps(GOOD).encode() + b"\n" * (16 << 20)))
    assert bomb.stat().st_size < 64 << 10
    with pytest.raises(InputDataError, match=r"bomb\.jsonl\.gz: gzip data decompresses to more "
                       r"than max_decompressed_bytes \(1048576 bytes\)"):
        read_questions("demo", str(bomb), QAInputLimits(max_decompressed_bytes=1 << 20))
    with pytest.raises(InputDataError, match="is a folder, not a file"):
        read_questions("demo", str(tmp_path))


def test_check_question_files_refuses_before_a_build(tmp_path: Path) -> None:
    from support.paths import QA_SOURCE

    from tasks_lib.qa.ingest import check_question_files

    assert check_question_files(["medqa", "pubmedqa"], str(QA_SOURCE)) == 3  # pubmedqa: + train
    (tmp_path / "questions").mkdir()
    (tmp_path / "questions" / "medqa.test.jsonl").write_text("\n")
    with pytest.raises(InputDataError, match=r"medqa\.test\.jsonl: question file has no lines"):
        check_question_files(["medqa"], str(tmp_path))
    with pytest.raises(InputDataError, match=r"pubmedqa\.test\.jsonl: question file not found"):
        check_question_files(["pubmedqa"], str(tmp_path))


def test_load_pool_names_the_bad_file_and_line(tmp_path: Path) -> None:
    from tasks_lib.qa.pool import FILES, load_pool
    from tasks_lib.storage import Storage

    root = Storage(str(tmp_path / "pool"))
    with pytest.raises(InputDataError, match=r"manifest\.json: no pool here; build one with"):
        load_pool(root)
    root.write_text("manifest.json", '{"pool_id": "p", "version": true')
    with pytest.raises(InputDataError, match=r"manifest\.json: invalid manifest\.json: "):
        load_pool(root)
    manifest = {"pool_id": "p", "version": 1, "content_hash": "x", "track": "qa",
                "created_at": "2026-01-01T00:00:00Z", "selection": {}, "datasets": {},
                "deid": {}, "deid_items": [], "meld": {}, "review": None, "files": FILES}
    root.write_json("manifest.json", manifest)
    item = {"dataset": "d", "realidx": "1", "question": "q", "options": {"A": "a"}}
    root.write_text(FILES["public_items"], json.dumps(item) + "\n" + json.dumps(
        {**item, "options": ["a"]}) + "\n")
    with pytest.raises(InputDataError, match=r"items\.jsonl:2: invalid row: options: "):
        load_pool(root)
