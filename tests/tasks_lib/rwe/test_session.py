"""submit_answers: cohort first, final answers, malformed answers not consumed, gates reveal
fields in the next call (spec §4, §11 check 5)."""

from __future__ import annotations

from pathlib import Path

from evaluators.graders.rwe import score_study
from tasks_lib.rwe.session import AnswerSession, read_record
from tests.tasks_lib.rwe.study_fixture import make_study


def session(tmp_path: Path) -> AnswerSession:
    study, key = make_study()
    (tmp_path / "ws").mkdir()
    return AnswerSession(study, key, tmp_path / "ws", tmp_path / "sub")


def test_refused_until_the_cohort_file_exists(tmp_path: Path) -> None:
    s = session(tmp_path)
    assert [q["id"] for q in s.opening()] == ["n", "female", "q1"]
    reply = s.submit_answers({"q1": "A"})
    assert reply.accepted == [] and reply.invalid == 1 and "cohort" in reply.message
    assert s.record.answers == {} and s.record.invalid_outputs == 1
    (tmp_path / "ws" / "cohort.csv").write_text("subject_id,anchor_age\n10000001,70\n")
    reply = s.submit_answers({"q1": "A", "n": 1})
    assert reply.accepted == ["q1", "n"]
    assert (tmp_path / "sub" / "cohort.csv").read_text().startswith("subject_id")
    # the cohort is frozen at the first accepted call: later edits do not count
    (tmp_path / "ws" / "cohort.csv").write_text("subject_id\n1\n")
    s.submit_answers({})
    assert (tmp_path / "sub" / "cohort.csv").read_text().count("\n") == 2


def test_right_gate_reveals_fields_for_the_next_call(tmp_path: Path) -> None:
    s = session(tmp_path)
    (tmp_path / "ws" / "cohort.csv").write_text("subject_id\n10000001\n")
    first = s.submit_answers({"q1": "a", "or": 0.6})  # 'or' not shown yet: not recorded
    assert first.accepted == ["q1"] and first.rejected == {"or": "not revealed"}
    assert [q["id"] for q in first.revealed] == ["or", "or_lo", "or_hi", "p"]
    assert all("value" not in q and "answer" not in q for q in first.revealed)
    assert first.unanswered == ["n", "female", "or", "or_lo", "or_hi", "p"]
    second = s.submit_answers({"or": 0.6, "or_lo": 0.45, "or_hi": 0.8, "p": "0.002",
                               "n": 2, "female": 50})
    assert second.rejected == {} and second.unanswered == []
    record = read_record(tmp_path / "sub")
    assert record.order == ["q1", "or", "or_lo", "or_hi", "p", "n", "female"]
    score = score_study(s.tree, record.answers)
    assert (score.acc, score.rar, score.smr, score.sr, score.cr) == (1.0, 1.0, 1.0, 1.0, 1.0)


def test_answers_are_final_and_malformed_ones_are_not_consumed(tmp_path: Path) -> None:
    s = session(tmp_path)
    (tmp_path / "ws" / "cohort.csv").write_text("subject_id\n10000001\n")
    s.submit_answers({"q1": "A"})
    reply = s.submit_answers({"q1": "B", "or": -2, "p": "tiny", "zz": 1})
    assert reply.accepted == [] and reply.invalid == 4
    assert reply.rejected["q1"].startswith("already answered")
    assert reply.rejected["or"].startswith("malformed") and reply.rejected["zz"] == \
        "unknown question id"
    assert s.record.answers == {"q1": "A"}
    assert s.submit_answers({"or": 0.5}).accepted == ["or"]  # not consumed by the bad try


def test_wrong_gate_hides_fields_for_good(tmp_path: Path) -> None:
    s = session(tmp_path)
    (tmp_path / "ws" / "cohort.csv").write_text("subject_id\n10000001\n")
    reply = s.submit_answers({"q1": "C", "n": 2, "female": 50.0})
    assert reply.revealed == [] and reply.unanswered == []
    assert s.submit_answers({"or": 0.5}).rejected == {"or": "not revealed"}
    score = score_study(s.tree, s.record.answers)
    assert (score.acc, score.rar, score.smr, score.sr, score.cr) == (0.0, 0.0, 0.0, 0.0, 1.0)
    assert score.hidden == ["or", "or_lo", "or_hi", "p"]
