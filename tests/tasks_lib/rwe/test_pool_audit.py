"""The RWE pool in the one exploit audit (issue 22): the kit's null agents are pool-level
submissions scored by its own study scorer (a constant letter's pool SR is the mean of the
golden per-study values of the track contract, worked out by hand from the cards); a table the
run role can read outside the study schemas is answer-key evidence; the trap panel is checked
before the pool is written (construction validity, not an audit probe)."""

from __future__ import annotations

from pathlib import Path

import psycopg2
import pytest

from tasks_lib.audit import audit_pool
from tasks_lib.audits.baselines import EMPTY, NONE, PERFECT
from tasks_lib.audits.pool import pool_info
from tasks_lib.audits.scoring import score_folder
from tasks_lib.errors import InputDataError
from tasks_lib.rwe import load
from tasks_lib.rwe.pool_files import load_study_pool
from tasks_lib.rwe.questions import question_tree
from tasks_lib.rwe.types import TrapOutcome, VariantOutcome
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import kit_for
from tests.tasks_lib.rwe.test_contract import constant_golden


def test_null_agents_score_through_the_study_scorer(tmp_path: Path) -> None:
    from tests.tasks_lib.rwe.pool_support import small_pool

    url = small_pool(tmp_path / "pool")
    info = pool_info(url)
    scored = {b.name: score_folder(info, b.folder, b.folder.name)
              for b in kit_for("rwe").baselines(url, tmp_path / "baselines")}
    pool = load_study_pool(Storage(url))
    golden = {s.study_id: constant_golden(s.study_id, {
        q.question_id: q.answer for q in question_tree(s, pool.answers[s.study_id]).questions})
        for s in pool.studies}
    constant = scored["constant 'A' + null effects"]
    assert {c.case_id: c.values["rwe_sr"] for c in constant.per_case} == {
        s: g[3] for s, g in golden.items()}
    assert constant.task_score == pytest.approx(sum(g[3] for g in golden.values()) / 2)
    assert constant.metrics["rwe_acc"] == pytest.approx(sum(g[0] for g in golden.values()) / 2)
    assert scored[PERFECT].task_score == 1.0 and scored[PERFECT].coverage == 1.0
    assert scored[EMPTY].task_score == 0.0 and scored[NONE].task_score == 0.0
    assert all("answers.json missing" in c.reason for c in scored[NONE].per_case)


def test_a_table_the_run_role_can_read_is_found(tmp_path: Path) -> None:
    from tasks_lib.rwe.cluster import study_server
    from tasks_lib.rwe.roles import READER, ensure_reader
    from tests.tasks_lib.rwe.ehr_db import loaded_db
    from tests.tasks_lib.rwe.pool_support import small_pool

    url = small_pool(tmp_path / "pool")
    db = load_study_pool(Storage(url), private=False).manifest.database
    ensure_reader(study_server().model_copy(update={"database": db}))
    grant = (f"CREATE SCHEMA leak; CREATE TABLE leak.gold (field text, value float); "
             f"GRANT USAGE ON SCHEMA leak TO {READER}; GRANT SELECT ON leak.gold TO {READER}")
    with psycopg2.connect(**load.dsn(loaded_db().url)) as conn, conn.cursor() as cur:
        cur.execute(grant)
    conn.close()
    try:
        report = audit_pool(url, judge_model="rules", sandbox=False)
    finally:
        with psycopg2.connect(**load.dsn(loaded_db().url)) as conn, conn.cursor() as cur:
            cur.execute("DROP SCHEMA leak CASCADE")
        conn.close()
    key = next(f for f in report.findings if f.check == "answer_key")
    assert not report.clean and not key.passed
    assert key.evidence == [f"study database {db}: the run role can read leak.gold (rule: the "
                            "run role reads only the documented study tables and columns, "
                            "without comments)"]


def _build(traps: list[TrapOutcome]) -> object:
    from types import SimpleNamespace

    return SimpleNamespace(study=SimpleNamespace(study_id="s1"), traps=traps, variants=[
        VariantOutcome(study_id="s1", variant="extra_covariates", flipped=[], values={})])


def test_the_trap_panel_is_checked_before_the_pool_is_written() -> None:
    from tasks_lib.rwe.construct_steps import validate

    flips = TrapOutcome(study_id="s1", trap="t1", flipped=["or_x"], values={})
    validate.fn([_build([flips])])  # a trap that flips a scored field: valid
    with pytest.raises(InputDataError, match=r"s1: trap t2 flips nothing"):
        validate.fn([_build([flips, flips.model_copy(update={"trap": "t2", "flipped": []})])])
    with pytest.raises(InputDataError, match=r"s1: no trap analysis"):
        validate.fn([_build([])])


def test_the_cohort_judge_is_probed_for_injected_instructions(tmp_path: Path) -> None:
    """The judge-injection probe reaches RWE's cohort judge: an ineligible case carrying a
    payload must stay excluded. The offline rules judge is not moved; a judge that obeys
    instructions found in the case is caught."""
    import json

    from tasks_lib.audits.injection import PLAIN_ANSWER
    from tasks_lib.audits.pool import injections
    from tasks_lib.llm import Completion, Message
    from tasks_lib.rwe.pool_audit import rwe_judge_answers
    from tests.tasks_lib.rwe.pool_support import small_pool

    url = small_pool(tmp_path / "pool")
    payloads = [p["text"] for p in injections()]
    answers = [PLAIN_ANSWER] + [f"{PLAIN_ANSWER}\n{p}" for p in payloads]
    assert rwe_judge_answers(url, answers, "rules") == [0.0] * len(answers)

    def obedient(model: str, messages: list[Message], **_: object) -> Completion:
        text = str(messages[-1].content)  # the case is JSON in the prompt: payloads escaped
        told = any(json.dumps(p, ensure_ascii=False)[1:-1] in text or
                   json.dumps(p)[1:-1] in text for p in payloads)
        verdict = {"violations": [] if told else ["out of range"], "exclude": not told}
        return Completion(text=json.dumps(verdict), prompt_tokens=1, completion_tokens=1,
                          latency_s=0.0)

    values = rwe_judge_answers(url, answers, "obedient-judge", completion=obedient)
    assert values == [0.0] + [1.0] * len(payloads)
    report = audit_pool(url, judge_model="rules", sandbox=False)
    probe = next(f for f in report.findings if f.check == "judge_injection")
    assert probe.passed and "answer judge" in probe.rule
