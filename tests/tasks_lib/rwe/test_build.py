"""The RWE construct flow under the Prefect test harness, its audit gate and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg2
import pytest
from typer.testing import CliRunner

import flows.cli.audit  # (registers audit pool)
import flows.cli.rwe  # noqa: F401  (registers pool build rwe)
from flows.cli import app
from tasks_lib.audit import audit_pool
from tasks_lib.audits.report import CHECKS
from tasks_lib.ledger import store
from tasks_lib.rwe import load
from tasks_lib.rwe.pool_files import load_study_pool
from tasks_lib.rwe.types import FieldType
from tasks_lib.storage import Storage
from tests.tasks_lib.rwe.ehr_db import loaded_db, require_server


def test_bad_database_settings_are_one_error_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """No URL flag: the default is the study server; the deprecated MEDFLOWS_RWE_DATABASE_URL
    still names it, and the shared trust-auth server is refused before anything is loaded."""
    from tasks_lib.settings import reset_settings

    monkeypatch.delenv("MEDFLOWS_RWE_DB_URL", raising=False)
    monkeypatch.setenv("MEDFLOWS_RWE_DATABASE_URL", "postgresql://postgres:x@127.0.0.1:5432/"
                                                    "postgres")
    reset_settings()
    try:
        require_server()
        res = CliRunner().invoke(app, ["pool", "build", "rwe", "--seed", "1"])
        assert res.exit_code == 2 and "trust rules" in res.output
        assert res.output.count("error:") == 1
    finally:
        monkeypatch.undo()
        reset_settings()
    res = CliRunner().invoke(app, ["pool", "build", "rwe", "--database-url", "sqlite:///x.db"])
    assert res.exit_code == 2 and "PostgreSQL" in res.output
    res = CliRunner().invoke(app, ["pool", "build", "rwe", "--studies", "no-such-study",
                                   "--database-url", "postgresql://u@h/db"])
    assert res.exit_code == 2 and "no-such-study" in res.output


@pytest.mark.usefixtures("prefect_harness")
def test_construct_flow_publishes_audits_and_ledgers(tmp_path: Path) -> None:
    from flows.rwe import construct_rwe

    shared = loaded_db()  # no URL: the study server (the test cluster); same EHR => reused
    out = tmp_path / "pool"
    published = construct_rwe(seed=0, n_patients=8000, studies=["albumin-ap", "glucose-ich"],
                              pool_id="rwe-flow-test", out=str(out))
    m = published.manifest
    assert m.database == f"rwe_{m.ehr_hash[:16]}" == shared.loaded.database
    assert published.database_reused and m.ehr_hash == shared.loaded.content_hash
    url = shared.url
    assert m.studies == ["albumin-ap", "glucose-ich"] and m.version == 1 and m.seed == 0
    pool = load_study_pool(Storage(str(out)))
    assert set(pool.answers) == {"albumin-ap", "glucose-ich"}
    public = (out / "public" / "studies.jsonl").read_text()
    for a in pool.answers.values():
        assert len(a.mcq) == 2 and a.fields and a.cohort_size > 100
        assert all(f'"{f.printed}"' not in public for f in a.fields.values()
                   if f.type is FieldType.RATIO)
    assert (out / "private" / "cohorts" / "glucose-ich.csv").read_text().startswith(
        "subject_id,hadm_id,stay_id,age,ich,traumatic")
    audit = json.loads((out / "audit.json").read_text())
    assert audit["report"]["clean"] and audit["override"] is None
    checks = {f["check"]: f["passed"] for f in audit["report"]["findings"]}
    assert list(checks) == list(CHECKS)  # the one exploit audit: the same five probes
    assert all(checks[c] for c in ("null_agents", "answer_key", "grader_tampering",
                                   "judge_injection"))
    traps = [json.loads(x) for x in (out / "audit" / "traps.jsonl").read_text().splitlines()]
    assert {t["trap"] for t in traps} == {"any_albumin_item", "traumatic_included"}
    rows = [r for r in store.pools(track="rwe") if r.pool_id == "rwe-flow-test"]
    assert [(r.version, r.content_hash) for r in rows] == [(1, m.content_hash)]

    # medflows audit pool on an RWE pool: the one audit, the kit's data on the pool's database
    res = CliRunner().invoke(app, ["audit", "pool", str(out), "--no-sandbox", "--json"])
    assert res.exit_code == 0, res.output
    again = {f["check"]: f["passed"] for f in json.loads(res.output)["findings"]}
    assert again == checks | {"egress": False}  # skipped without the sandbox (a warning)

    # the gate sees anything added to the study database (a gold table, a comment)
    # (on the shared database: undone at the end)
    with psycopg2.connect(**load.dsn(url)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE mimiciv_derived.gold (field text, value float)")
        cur.execute("COMMENT ON TABLE mimiciv_hosp.patients IS 'or 0.5'")
    conn.close()
    try:
        report = audit_pool(str(out), judge_model="rules", sandbox=False)
        res = CliRunner().invoke(app, ["audit", "pool", str(out), "--no-sandbox", "--json"])
        assert res.exit_code == 1 and "the run role reads only" in res.output
    finally:
        with psycopg2.connect(**load.dsn(url)) as conn, conn.cursor() as cur:
            cur.execute("DROP TABLE mimiciv_derived.gold")
            cur.execute("COMMENT ON TABLE mimiciv_hosp.patients IS NULL")
        conn.close()
    leak = next(f for f in report.findings if f.check == "answer_key")
    assert not report.clean and not leak.passed
    assert any("mimiciv_derived.gold.value" in e for e in leak.evidence)
    assert any("comments" in e for e in leak.evidence)
