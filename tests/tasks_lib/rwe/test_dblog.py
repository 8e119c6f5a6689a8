"""The server-log reader of a run: a caught refusal is found in the logged statement, under a
120 MB flood, in a multi-line statement, and after the log was emptied; the run role's bytes are
counted (no cluster needed: the log lines are the server's format)."""

from __future__ import annotations

import time
from pathlib import Path

from tasks_lib.rwe.dblog import PER_CHECK, LogWatch

ROLE = "rwe_run_x"
PREFIX = "2026-01-01 00:00:00.000 UTC [42] user={user} db=rwe_1 "


def line(text: str, user: str = ROLE) -> str:
    return PREFIX.format(user=user) + text + "\n"


def test_a_refusal_caught_in_plpgsql_is_found_under_a_120_mb_flood(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(line("LOG:  statement: SELECT pg_read_file('/etc/passwd')"))  # before the run
    watch = LogWatch(log, ROLE, ["mimiciv_hosp", "scratch_x"])
    watch.forbid_schemas(["mimiciv_hosp", "scratch_x", "scratch_other", "medflows_private"])
    flood = line("LOG:  " + "y" * 400) * 10_000
    with log.open("a") as fh:
        for _ in range(30):  # 30 × ~4.3 MB: 120 MB of the role's own RAISE LOG lines
            fh.write(flood)
        fh.write(line("LOG:  statement: DO $$ BEGIN\n  PERFORM * FROM\n  medflows_private.gold;"
                      "\nEXCEPTION WHEN others THEN NULL; END $$"))
        fh.write(line("LOG:  statement: SELECT * FROM scratch_other.cohort", user="rwe_run_y"))
        fh.write(line("LOG:  statement: SELECT count(*) FROM mimiciv_hosp.patients"))
    start = watch.offset
    assert watch.check() == [] and 0 < watch.offset - start <= PER_CHECK  # a check is bounded
    started = time.monotonic()
    found = watch.check(limit=None)  # the rest, to the end (as the watchdog's last read)
    assert time.monotonic() - started < 30
    assert [v.kind.value for v in found] == ["database_access"]
    assert "'medflows_private'" in found[0].evidence
    assert watch.role_bytes > 120 * 10**6
    assert watch.check() == []  # read once


def test_refused_errors_and_failed_logins_are_violations(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("")
    watch = LogWatch(log, ROLE, ["scratch_x"])
    with log.open("a") as fh:
        fh.write(line("ERROR:  permission denied for schema scratch_other"))
        fh.write(line("ERROR:  permission denied for table t", user="rwe_run_other"))
        fh.write(line('FATAL:  password authentication failed for user "postgres"',
                      user="postgres"))
        fh.write(line("LOG:  statement: ALTER ROLE CURRENT_USER SET statement_timeout = 0"))
        fh.write(line("LOG:  statement: SET statement_timeout = 0"))
        fh.write(line("LOG:  statement: SELECT * FROM scratch_x.mine, scratch_later.theirs"))
    evidence = [v.evidence for v in watch.check()]
    assert evidence == ["permission denied for schema scratch_other",
                        'password authentication failed for user "postgres"',
                        "statement naming 'ALTER ROLE': …statement: ALTER ROLE CURRENT_USER SET "
                        "statement_timeout = 0…",
                        "statement naming 'scratch_later': …statement: SELECT * FROM "
                        "scratch_x.mine, scratch_later.theirs…"]


def test_an_emptied_log_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(line("LOG:  " + "z" * 1000) * 100)
    watch = LogWatch(log, ROLE)
    log.write_text(line("LOG:  statement: COPY (SELECT 1) TO PROGRAM 'id'"))  # the sweep emptied it
    found = watch.check()
    assert len(found) == 1 and "PROGRAM" in found[0].evidence
