"""Per-run roles on a real scram-auth cluster (spec §3, §11 checks 16–17)."""

from __future__ import annotations

from datetime import timedelta

import psycopg2
import pytest
from psycopg2 import errors

from tasks_lib.rwe.cluster import Cluster, Server
from tasks_lib.rwe.roles import RoleLimits, create_role, leftover_roles, run_role, sweep_roles

pytestmark = pytest.mark.slow


def login(server: Server, name: str, password: str, database: str | None = None
          ) -> psycopg2.extensions.connection:
    conn = psycopg2.connect(host=server.host, port=server.port, user=name, password=password,
                            dbname=database or server.database)
    conn.autocommit = True
    return conn


def refused(conn: psycopg2.extensions.connection, statement: str) -> bool:
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
    except (errors.InsufficientPrivilege, errors.UndefinedTable, errors.InvalidSchemaName):
        return True
    return False


def test_cluster_has_no_trust_rule_and_refuses_passwordless_postgres(
        rwe_cluster: Cluster, rwe_server: Server) -> None:
    hba = (rwe_cluster.data / "pg_hba.conf").read_text()
    rules = [line for line in hba.splitlines() if line.strip() and not line.startswith("#")]
    assert rules and all(line.split()[-1] == "scram-sha-256" for line in rules)
    with pytest.raises(psycopg2.OperationalError, match="password"):
        psycopg2.connect(host=rwe_server.host, port=rwe_server.port, user="postgres",
                         dbname="postgres")


def test_role_reads_study_schema_only_and_is_dropped(rwe_server: Server) -> None:
    with run_role(rwe_server, "run-abc123") as role:
        assert role.name == "rwe_run_run_abc123"
        conn = login(rwe_server, role.name, role.password)
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM mimiciv_hosp.patients")
            assert cur.fetchone() == (3,)
            cur.execute(f"CREATE TABLE {role.scratch}.cohort AS "
                        "SELECT subject_id FROM mimiciv_hosp.patients WHERE anchor_age >= 18")
            cur.execute("CREATE TEMP TABLE t AS SELECT 1 AS x")
        assert refused(conn, "SELECT * FROM medflows_private.gold")
        assert refused(conn, "INSERT INTO mimiciv_hosp.patients VALUES (1, 'M', 40)")
        assert refused(conn, "DELETE FROM mimiciv_hosp.patients")
        assert refused(conn, "CREATE TABLE mimiciv_hosp.mine (x int)")
        assert refused(conn, "CREATE TABLE public.mine (x int)")
        assert refused(conn, "CREATE ROLE intruder")
        assert refused(conn, "COPY (SELECT 1) TO PROGRAM 'id'")
        assert refused(conn, "SELECT pg_read_file('/etc/passwd')")
        assert refused(conn, "SELECT rolpassword FROM pg_authid")
        conn.close()
        with pytest.raises(psycopg2.OperationalError, match="permission denied"):
            login(rwe_server, role.name, role.password, database="postgres")
    assert leftover_roles(rwe_server) == []
    with pytest.raises(psycopg2.OperationalError):
        login(rwe_server, role.name, role.password)


def test_cross_role_reads_are_refused(rwe_server: Server) -> None:
    with run_role(rwe_server, "run-a") as a, run_role(rwe_server, "run-b") as b:
        ca, cb = login(rwe_server, a.name, a.password), login(rwe_server, b.name, b.password)
        with ca.cursor() as cur:
            cur.execute(f"CREATE TABLE {a.scratch}.cohort AS SELECT 1 AS subject_id")
        assert refused(cb, f"SELECT * FROM {a.scratch}.cohort")
        assert refused(cb, f"CREATE TABLE {a.scratch}.x (y int)")
        assert refused(cb, f"SET ROLE {a.name}")
        ca.close()
        cb.close()
    assert leftover_roles(rwe_server) == []


def test_statement_timeout_and_connection_limit(rwe_server: Server) -> None:
    limits = RoleLimits(statement_timeout="1s", connection_limit=2)
    with run_role(rwe_server, "run-limits", limits) as role:
        conns = [login(rwe_server, role.name, role.password) for _ in range(2)]
        with pytest.raises(errors.QueryCanceled, match="statement timeout"), \
                conns[0].cursor() as cur:
            cur.execute("SELECT pg_sleep(3)")
        with pytest.raises(psycopg2.OperationalError, match="too many connections"):
            login(rwe_server, role.name, role.password)
        for c in conns:
            c.close()
    assert leftover_roles(rwe_server) == []


def test_role_dropped_when_the_run_fails(rwe_server: Server) -> None:
    with pytest.raises(ZeroDivisionError), run_role(rwe_server, "run-crash") as role:
        conn = login(rwe_server, role.name, role.password)  # left open on purpose
        raise ZeroDivisionError
    with pytest.raises(psycopg2.Error):  # its session was terminated by the teardown
        conn.cursor().execute("SELECT 1")
    assert leftover_roles(rwe_server) == []


def test_sweep_drops_roles_a_killed_run_left(rwe_server: Server) -> None:
    create_role(rwe_server, "run-killed", RoleLimits(valid_for=timedelta(seconds=-1)))
    create_role(rwe_server, "run-live")
    assert sweep_roles(rwe_server) == ["rwe_run_run_killed"]
    assert leftover_roles(rwe_server) == ["rwe_run_run_live", "scratch_run_live"]
    sweep_roles(rwe_server, expired_only=False)
    assert leftover_roles(rwe_server) == []


def test_a_pool_database_missing_from_the_study_server_is_named(rwe_server: Server) -> None:
    from evaluators.core import InputDataError
    from tasks_lib.rwe.cluster import check_study_database

    check_study_database(rwe_server, ["mimiciv_hosp", "mimiciv_icu"])
    with pytest.raises(InputDataError, match="mimiciv_other"):
        check_study_database(rwe_server, ["mimiciv_hosp", "mimiciv_other"])
    elsewhere = rwe_server.model_copy(update={"database": "loaded_on_another_server"})
    with pytest.raises(InputDataError, match="pool build rwe --seed"):
        check_study_database(elsewhere, ["mimiciv_hosp"])


def test_ehr_databases_are_content_addressed_and_roles_reach_only_theirs(
        rwe_server: Server) -> None:
    """Two EHRs get two databases; loading the first again reuses it (no write, its content
    stays); a run role of one pool may CONNECT to that database only; a changed recorded hash
    makes the run refuse."""
    from evaluators.core import InputDataError
    from tasks_lib.rwe import load
    from tasks_lib.rwe.cluster import check_study_database, connect

    tiny = {"mimiciv_hosp.patients": b"subject_id,gender,anchor_age,anchor_year,"
            b"anchor_year_group,dod\n10000001,F,70,2150,2014 - 2016,\n"}
    hash_a, hash_b = "a" * 64, "b" * 64
    admin = rwe_server.url()
    first = load.ensure_ehr_database(admin, hash_a, tiny)
    try:
        assert (first.name, first.reused, first.rows) == (
            "rwe_aaaaaaaaaaaaaaaa", False, {"mimiciv_hosp.patients": 1})
        server_a = rwe_server.model_copy(update={"database": first.name})
        conn = connect(server_a)
        with conn.cursor() as cur:  # a marker row: a reuse must not reload
            cur.execute("INSERT INTO mimiciv_hosp.patients VALUES "
                        "(10000002, 'M', 50, 2150, '2014 - 2016', NULL)")
        conn.close()
        other = load.ensure_ehr_database(admin, hash_b, tiny)
        again = load.ensure_ehr_database(admin, hash_a, tiny)
        assert other.name == "rwe_bbbbbbbbbbbbbbbb" and not other.reused and again.reused
        conn = connect(server_a)
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM mimiciv_hosp.patients")
            assert cur.fetchone() == (2,)
        conn.close()
        check_study_database(server_a, ["mimiciv_hosp"], hash_a)
        with pytest.raises(InputDataError, match="holds EHR bbbbbbbbbbbbbbbb"):
            check_study_database(server_a.model_copy(update={"database": other.name}),
                                 ["mimiciv_hosp"], hash_a)
        with run_role(server_a, "run-pool-a") as role:
            login(server_a, role.name, role.password).close()
            for elsewhere in (other.name, rwe_server.database):
                with pytest.raises(psycopg2.OperationalError, match="permission denied"):
                    login(server_a, role.name, role.password, database=elsewhere)
    finally:
        for name in ("rwe_aaaaaaaaaaaaaaaa", "rwe_bbbbbbbbbbbbbbbb"):
            load.drop_database(admin, name)
