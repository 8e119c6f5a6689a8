"""The run watchdog against hostile sessions of a run role on a real cluster: limits the role
cannot switch off (statement time, backend memory, scratch and temporary tables, log volume,
detached clients), refused requests hidden in an exception handler, nothing left after the
run (issue 21, point 2)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg2
import pytest
from psycopg2 import errors

from tasks_lib.rwe.cluster import Cluster, Server, connect
from tasks_lib.rwe.dblog import LogWatch
from tasks_lib.rwe.roles import READER, RoleLimits, RunRole, leftover_roles, run_role
from tasks_lib.rwe.watchdog import Watchdog
from tasks_lib.sandbox.base import Violation, ViolationKind

pytestmark = pytest.mark.slow

FAST = RoleLimits(statement_s=600.0, poll_s=0.1, backend_memory=160 * 2**20,
                  scratch_bytes=32 * 2**20, log_bytes=4 * 2**20)


def login(server: Server, role: RunRole) -> psycopg2.extensions.connection:
    conn = psycopg2.connect(server.dsn(user=role.name, password=role.password))
    conn.autocommit = True
    return conn


@contextmanager
def watched(cluster: Cluster, server: Server, run_id: str, limits: RoleLimits = FAST
            ) -> Iterator[tuple[RunRole, Watchdog]]:
    with run_role(server, run_id, limits) as role:
        watch = LogWatch(cluster.log, role.name, ["mimiciv_hosp", role.scratch])
        with Watchdog(server, role.name, limits, watch, cluster.data, 600) as dog:
            yield role, dog


def kinds(found: list[Violation]) -> set[str]:
    return {v.kind.value for v in found}


def test_statement_time_is_enforced_although_the_role_switched_it_off(
        rwe_cluster: Cluster, rwe_server: Server) -> None:
    with watched(rwe_cluster, rwe_server, "wd-time",
                 FAST.model_copy(update={"statement_s": 1.0})) as (role, dog):
        first = login(rwe_server, role)
        with first.cursor() as cur:
            cur.execute("SET statement_timeout = 0")
            cur.execute("ALTER ROLE CURRENT_USER SET statement_timeout = 0")
            cur.execute("ALTER ROLE CURRENT_USER RESET ALL")
        second = login(rwe_server, role)  # its defaults are the altered ones
        started = time.monotonic()
        with pytest.raises(errors.QueryCanceled), second.cursor() as cur:
            cur.execute("SHOW statement_timeout")
            assert cur.fetchone() == ("0",)
            cur.execute("SELECT pg_sleep(30)")
        assert time.monotonic() - started < 5
        with second.cursor() as cur:  # the session goes on: a time limit is no violation
            cur.execute("SELECT 1")
        first.close()
        second.close()
        time.sleep(0.3)
        found = dog.check()
        assert any("cancelled" in a for a in dog.drain_actions())
    assert kinds(found) == {"database_access"}
    assert any("alter role" in v.evidence.lower() for v in found)


def test_a_backend_past_its_memory_limit_is_terminated(rwe_cluster: Cluster,
                                                        rwe_server: Server) -> None:
    with watched(rwe_cluster, rwe_server, "wd-memory") as (role, dog):
        conn = login(rwe_server, role)
        started = time.monotonic()
        with pytest.raises(psycopg2.OperationalError), conn.cursor() as cur:
            cur.execute("SET work_mem = '3GB'; SET hash_mem_multiplier = 10; "
                        "SET enable_sort = off")
            cur.execute("SELECT count(*) FROM (SELECT g, count(*) FROM "
                        "generate_series(1, 40000000) g GROUP BY g) x")
        assert time.monotonic() - started < 60
        found = dog.check()
    memory = [v for v in found if "private memory" in v.evidence]
    assert memory and memory[0].kind is ViolationKind.RESOURCE_LIMIT
    used = int(memory[0].evidence.split(" used ")[1].split(" MiB")[0])
    # Stopped within one poll interval of the limit; the evidence floors bytes to MiB, so a
    # backend a few KiB past 160 MiB reads 160.
    assert 160 <= used < 160 + 512


@pytest.mark.parametrize("table", ["UNLOGGED TABLE {scratch}.big", "TEMP TABLE big"])
def test_uncommitted_scratch_and_temp_tables_over_quota_end_the_run_sessions(
        rwe_cluster: Cluster, rwe_server: Server, table: str) -> None:
    with watched(rwe_cluster, rwe_server, "wd-disk") as (role, dog):
        conn = login(rwe_server, role)
        conn.autocommit = False
        started = time.monotonic()
        with pytest.raises(psycopg2.OperationalError), conn.cursor() as cur:
            cur.execute(f"CREATE {table.format(scratch=role.scratch)} AS SELECT g, "
                        "repeat(md5(g::text), 16) AS pad FROM generate_series(1, 5000000) g")
        assert time.monotonic() - started < 60
        with pytest.raises(psycopg2.OperationalError, match="not permitted to log in"):
            login(rwe_server, role)
        found = dog.check()
    assert [v.kind for v in found] == [ViolationKind.RESOURCE_LIMIT]
    assert "limit 32 MiB" in found[0].evidence and "role locked" in found[0].evidence


def test_committed_tables_count_and_cannot_be_given_away(rwe_cluster: Cluster,
                                                        rwe_server: Server) -> None:
    with watched(rwe_cluster, rwe_server, "wd-given") as (role, dog):
        conn = login(rwe_server, role)
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {role.scratch}.small AS SELECT 1 AS x")
            with pytest.raises(errors.InsufficientPrivilege):
                cur.execute(f"ALTER TABLE {role.scratch}.small OWNER TO {READER}")
            with pytest.raises(psycopg2.OperationalError):
                for _ in range(20):  # grow it in committed steps until the watchdog stops it
                    cur.execute(f"INSERT INTO {role.scratch}.small SELECT g FROM "
                                "generate_series(1, 300000) g")
                    time.sleep(0.1)
        found = dog.check()
    assert any("MiB (scratch" in v.evidence for v in found)
    assert any("owner to" in v.evidence.lower() for v in found)


def test_a_flood_neither_fills_the_disk_nor_hides_a_caught_refusal(
        rwe_cluster: Cluster, rwe_server: Server) -> None:
    before = rwe_cluster.log.stat().st_size
    with watched(rwe_cluster, rwe_server, "wd-flood") as (role, dog):
        conn = login(rwe_server, role)
        with conn.cursor() as cur:
            cur.execute("DO $$ BEGIN PERFORM * FROM medflows_private.gold; "
                        "EXCEPTION WHEN others THEN NULL; END $$")
        started = time.monotonic()
        with pytest.raises(psycopg2.OperationalError), conn.cursor() as cur:
            cur.execute("DO $$ BEGIN FOR i IN 1..100000000 LOOP "
                        "RAISE LOG '%', repeat('y', 400); END LOOP; END $$")
        assert time.monotonic() - started < 30
        found = dog.check()
    grown = rwe_cluster.log.stat().st_size - before
    assert grown < 64 * 2**20
    evidence = "\n".join(v.evidence for v in found)
    assert "'medflows_private'" in evidence and "to the server log (limit 4 MiB)" in evidence
    assert kinds(found) == {"database_access", "resource_limit"}


def test_a_detached_query_is_ended_after_the_code_returns(rwe_cluster: Cluster,
                                                          rwe_server: Server) -> None:
    with watched(rwe_cluster, rwe_server, "wd-detached") as (role, dog):
        conn = login(rwe_server, role)
        ended: list[str] = []

        def detached() -> None:
            try:
                conn.cursor().execute("SELECT pg_sleep(60)")
            except psycopg2.Error as exc:
                ended.append(type(exc).__name__)

        worker = threading.Thread(target=detached, daemon=True)
        worker.start()  # the "background process" of the agent's code
        time.sleep(0.5)
        found = dog.check()
        worker.join(timeout=10)
        assert ended == ["OperationalError"]
    assert [v.kind for v in found] == [ViolationKind.RESOURCE_LIMIT]
    assert "detached client" in found[0].evidence


def test_no_object_outlives_the_run(rwe_server: Server) -> None:
    admin = connect(rwe_server)
    with run_role(rwe_server, "wd-objects") as role:
        conn = login(rwe_server, role)
        with conn.cursor() as cur:
            for make in ("SELECT lo_create(0)", "SELECT lo_from_bytea(0, 'x')"):
                with pytest.raises(errors.InsufficientPrivilege):
                    cur.execute(make)
            cur.execute("ALTER ROLE CURRENT_USER SET work_mem = '3GB'")
            cur.execute("CREATE TEMP TABLE t AS SELECT 1 AS x")
        with admin.cursor() as cur:  # a large object given to the shared role (older runs)
            cur.execute("SELECT lo_from_bytea(0, 'secret')")
            cur.execute(f"ALTER LARGE OBJECT {cur.fetchone()[0]} OWNER TO {READER}")
            cur.execute("SELECT oid FROM pg_roles WHERE rolname = %s", (role.name,))
            oid = cur.fetchone()[0]
    with admin.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_largeobject_metadata")
        assert cur.fetchone() == (0,)
        cur.execute("SELECT count(*) FROM pg_db_role_setting WHERE setrole = %s", (oid,))
        assert cur.fetchone() == (0,)
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (role.name,))
        assert cur.fetchone() == (0,)
    admin.close()
    assert leftover_roles(rwe_server) == []
