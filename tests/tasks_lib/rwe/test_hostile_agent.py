"""The hostile scripted agent ``rwe-dbhog`` in the bwrap sandbox against a real pool database:
memory, disk, log and time stay within the run's limits, the run is invalid with the
violations named, and the next run sees nothing of it (issue 21, point 2 acceptance)."""

from __future__ import annotations

import shutil
import threading
import time

import psycopg2
import pytest

from tasks_lib.domain import Tier
from tasks_lib.harness.cell import execute_cell, plan_cell
from tasks_lib.harness.environment import local_root
from tasks_lib.rwe.cell import RweEnvironment
from tasks_lib.rwe.cluster import Server, connect
from tasks_lib.rwe.pools import load_study
from tasks_lib.rwe.roles import RoleLimits, leftover_roles, run_role
from tasks_lib.rwe.watchdog import private_memory
from tasks_lib.sandbox.base import SandboxBackend
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import find_card
from tests.tasks_lib.rwe.pool_support import built_pool, study_cluster

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed")]

LIMITS = RoleLimits(statement_s=3.0, poll_s=0.1, backend_memory=192 * 2**20,
                    scratch_bytes=64 * 2**20, log_bytes=4 * 2**20)
OVERSHOOT = 256 * 2**20
"""What one poll interval may add past a limit (documented in docs/rwe.md)."""


class Sampler:
    """Peak private memory of run backends and peak growth of the pool database, sampled from
    outside every 50 ms while the run goes on."""

    def __init__(self, server: Server) -> None:
        self.conn = connect(server)
        self.memory = self.growth = 0
        self.stop = threading.Event()
        with self.conn.cursor() as cur:
            cur.execute("SELECT pg_database_size(current_database())")
            self.base = cur.fetchone()[0]
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        with self.conn.cursor() as cur:
            while not self.stop.wait(0.05):
                cur.execute("SELECT pid FROM pg_stat_activity WHERE usename LIKE 'rwe_run_%'")
                for (pid,) in cur.fetchall():
                    self.memory = max(self.memory, private_memory(pid) or 0)
                cur.execute("SELECT pg_database_size(current_database())")
                self.growth = max(self.growth, cur.fetchone()[0] - self.base)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.conn.close()


def test_dbhog_stays_within_the_limits_and_leaves_nothing() -> None:
    cluster, admin = study_cluster()
    loaded = load_study("statin-sepsis", built_pool().url)
    server = admin.model_copy(update={"database": loaded.manifest.database})
    env = RweEnvironment(find_card("statin-sepsis"), local_root(Storage(loaded.pool_url)),
                         role_limits=LIMITS)
    plan = plan_cell("rwe-dbhog", env, Tier.LITE, SandboxBackend.LOCAL, 0,
                     get_settings().judge_model)
    log_before = cluster.log.stat().st_size
    sampler = Sampler(server)
    started = time.monotonic()
    try:
        execution = execute_cell(plan, env)
    finally:
        sampler.close()
    assert time.monotonic() - started < 120
    assert sampler.memory < LIMITS.backend_memory + OVERSHOOT
    assert sampler.growth < LIMITS.scratch_bytes + OVERSHOOT
    assert cluster.log.stat().st_size - log_before < LIMITS.log_bytes + OVERSHOOT

    assert execution.status.value == "invalid" and execution.end.value == "terminated"
    evidence = "\n".join(f"{v.kind.value}: {v.evidence}" for v in execution.violations)
    assert "database_access: statement naming 'pg_authid'" in evidence  # caught, still seen
    assert "database_access: statement naming 'ALTER ROLE'" in evidence
    assert "resource_limit:" in evidence and "role locked" in evidence

    with run_role(server, "after-dbhog") as role:  # the next run sees nothing of it
        assert leftover_roles(server) == [role.name, role.scratch]
        conn = psycopg2.connect(server.dsn(user=role.name, password=role.password))
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_largeobject_metadata")
            assert cur.fetchone() == (0,)
            cur.execute("SELECT count(*) FROM pg_db_role_setting s LEFT JOIN pg_roles r "
                        "ON r.oid = s.setrole WHERE r.rolname IS DISTINCT FROM %s "
                        "AND s.setrole <> 0", (role.name,))
            assert cur.fetchone() == (0,)
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE usename <> %s "
                        "AND usename LIKE 'rwe_run_%%'", (role.name,))
            assert cur.fetchone() == (0,)
            cur.execute("SHOW statement_timeout")
            assert cur.fetchone() == ("20min",)
        conn.close()
    assert leftover_roles(server) == []
