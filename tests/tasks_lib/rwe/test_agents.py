"""The four scripted RWE agents in the bwrap sandbox against a real scram-auth cluster, scored
by the one score flow's code (spec §11: honest SR = 1 on every study; fabricated ids flagged;
careless cohort flagged; escape attempts refused, run invalid, in the ledger)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from tasks_lib.domain import Tier
from tasks_lib.harness.cell import plan_cell
from tasks_lib.harness.environment import local_root
from tasks_lib.harness.steps import execute_step
from tasks_lib.ledger import store
from tasks_lib.pricing import price_snapshot
from tasks_lib.records import RunRecord, ScoreCard, run_store
from tasks_lib.rwe.roles import leftover_roles, run_role
from tasks_lib.sandbox.base import SandboxBackend
from tasks_lib.scoring import score_one
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import find_card, kit_for
from tests.tasks_lib.rwe.pool_support import built_pool, study_cluster


def rwe_cell(agent_id: str, study_id: str, pool: str) -> RunRecord:
    """Plan and run one RWE cell on the pool ``pool`` through the one harness (the RWE kit's
    environment), stored and ledgered like every cell."""
    env = kit_for("rwe").environment(find_card(study_id), local_root(Storage(pool)))
    plan = plan_cell(agent_id, env, Tier.LITE, SandboxBackend.LOCAL, 0,
                     get_settings().judge_model)
    return execute_step.fn(plan)


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed")]


def run(agent: str, study: str) -> tuple[str, ScoreCard]:
    pool = built_pool()
    record = rwe_cell(agent, study, pool=pool.url)
    assert leftover_roles(study_cluster()[1]) == []  # dropped after every run
    return record.run_id, score_one(record.run_id)


def test_honest_agent_scores_sr_1_on_every_study() -> None:
    studies = built_pool().studies
    assert len(studies) >= 8
    for study in studies:
        run_id, card = run("rwe-honest", study)
        m = card.metrics
        assert (m["rwe_acc"], m["rwe_rar"], m["rwe_sr"], m["rwe_cr"]) == (1, 1, 1, 1), study
        assert m.get("rwe_smr", 1.0) == 1.0 and m["rwe_sr_screened"] == 1.0, study
        assert m["cohort_precision"] == m["cohort_recall"] == 1.0, study
        assert store.runs(run_id=run_id)[0].status == "completed"


def test_fabricating_agent_is_flagged_with_the_fabricated_ids() -> None:
    run_id, card = run("rwe-fabricate", "statin-sepsis")
    cohort = pd.read_csv(run_store(run_id).child("submission").url("cohort.csv"))
    invented = sorted(str(s) for s in cohort["subject_id"] if s < 10_000_000)
    assert invented
    line = next(n for n in card.notes if n.startswith("cohort fabricated_ids"))
    assert f"{len(invented)} row(s)" in line
    assert all(i in line for i in invented[:20])
    assert card.metrics["cohort_valid"] == 0.0 and card.metrics["rwe_sr_screened"] == 0.0


def test_careless_agent_cohort_is_flagged_and_fails() -> None:
    _, card = run("rwe-careless", "statin-sepsis")
    rules = {n.split(":")[0] for n in card.notes}
    assert {"cohort declared_ineligible", "cohort ineligible"} <= rules
    assert card.metrics["rwe_sr"] == 0.0 and card.metrics["cohort_precision"] < 1.0


def test_escape_agent_is_refused_and_its_run_invalid() -> None:
    from tests.tasks_lib.rwe.ehr_db import loaded_db

    built_pool()  # another run's role and scratch schema on the same pool database
    server = study_cluster()[1].model_copy(update={"database": loaded_db().loaded.database})
    with run_role(server, "run-other") as other:  # another run's role and scratch schema
        import psycopg2

        conn = psycopg2.connect(server.dsn(user=other.name, password=other.password))
        conn.autocommit = True
        conn.cursor().execute(f"CREATE TABLE {other.scratch}.cohort AS SELECT 1 AS subject_id")
        conn.close()
        record = rwe_cell("rwe-escape", "statin-sepsis", pool=built_pool().url)
        assert leftover_roles(server) == [other.name, other.scratch]
    card = score_one(record.run_id)
    evidence = "\n".join(record.violations)
    for refused in ("pg_read_file", "pg_authid", "external program",
                    'password authentication failed for user "postgres"',
                    f"permission denied for schema {other.scratch}"):
        assert refused in evidence
    assert record.status.value == "invalid"
    assert store.runs(run_id=record.run_id)[0].status == "invalid"
    assert card.invalid_reason is not None and card.invalid_reason.startswith("isolation")
    assert card.metrics["rwe_sr"] == 0.0
    assert leftover_roles(server) == []


def test_a_model_agent_works_through_the_call_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``gpt-4o-mini@tools`` against the local OpenAI-compatible server: the RWE tools reach
    the model, its SQL runs in the sandbox through the run's role (no toolkit mounted for
    model agents), its cohort and answers go through submit_answers, the run record and its
    ledger row carry the tokens and their cost, and the run is scored."""
    import json as _json
    from typing import Any

    from support.openai_server import FakeOpenAIServer

    from tasks_lib.rwe.session import read_record
    from tasks_lib.settings import reset_settings

    pool = built_pool()
    sql = ("import csv, psycopg2, rwe_db\n"
           "cur = psycopg2.connect(rwe_db.DSN).cursor()\n"
           "cur.execute('SELECT subject_id, hadm_id, stay_id, admission_age, true, los_icu, "
           "first_icu_stay FROM mimiciv_derived.icustay_detail ORDER BY stay_id LIMIT 20')\n"
           "rows = cur.fetchall()\n"
           "w = csv.writer(open('/workspace/cohort.csv', 'w'))\n"
           "w.writerow(['subject_id', 'hadm_id', 'stay_id', 'age', 'sepsis3', 'los_icu_days', "
           "'first_icu_stay']); w.writerows(rows)\nprint(len(rows), 'rows')\n")
    tools_seen: list[list[str]] = []

    def model(body: dict[str, Any]) -> dict[str, Any]:
        tools_seen.append([t["function"]["name"] for t in body.get("tools", [])])
        opening = _json.loads(body["messages"][1]["content"].split("\n", 1)[1])
        step = sum(m["role"] == "assistant" for m in body["messages"])
        calls = [("execute_code", {"language": "python", "code": sql}),
                 ("submit_answers", {"answers": {q["id"]: "A" for q in opening
                                                 if q["kind"] == "mcq"}}),
                 ("finish_task", {})]
        name, args = calls[min(step, 2)]
        return {"content": None, "tool_calls": [{"id": f"c{step}", "type": "function",
                "function": {"name": name, "arguments": _json.dumps(args)}}]}

    with FakeOpenAIServer(model) as srv:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", srv.base_url)
        reset_settings()
        record = rwe_cell("gpt-4o-mini@tools", "statin-sepsis", pool=pool.url)
    reset_settings()
    assert tools_seen[0] == ["execute_code", "submit_answers", "finish_task"]
    assert (record.status.value, record.end, record.turns) == ("completed", "finished", 3)
    assert record.violations == [] and record.input_tokens and record.output_tokens
    # tokens and cost on the run record and the ledger row, like every model-agent cell
    expected = price_snapshot().cost("gpt-4o-mini", record.input_tokens, record.output_tokens)
    assert expected is not None and expected > 0 and record.cost_usd == expected
    assert store.runs(run_id=record.run_id)[0].cost_usd == pytest.approx(expected)
    session = read_record(Path(run_store(record.run_id).child("submission").root_path))
    assert session.cohort_sha256 is not None and set(session.answers.values()) == {"A"}
    card = score_one(record.run_id)
    assert card.metrics["cohort_rows"] == 20.0 and card.metrics["rwe_steps"] == 3.0
