"""kill -9 of a real ``medflows run cell`` on an RWE study while its agent works: the role's
guard drops it within seconds and after the next command no role, session, scratch schema,
large object or role setting of it is left (issue 21, point 3, RWE half). Also: the sweep drops
roles of dead owners only, is cheap and starts nothing when no cluster runs; the guard waits
for its owner and ends with its role."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks_lib.rwe.cluster import Server, connect
from tasks_lib.settings import reset_settings
from tests.tasks_lib.rwe.pool_support import built_pool, study_cluster

MEDFLOWS = str(Path(sys.executable).with_name("medflows"))


def catalog(server: Server) -> dict[str, int]:
    """What runs may leave behind, counted in the catalogs of the pool database."""
    conn = connect(server)
    try:
        with conn.cursor() as cur:
            counts = {}
            for name, query in (
                    ("roles", "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'rwe\\_run\\_%'"),
                    ("sessions", "SELECT count(*) FROM pg_stat_activity "
                                 "WHERE usename LIKE 'rwe\\_run\\_%'"),
                    ("schemas", "SELECT count(*) FROM pg_namespace "
                                "WHERE nspname LIKE 'scratch\\_%'"),
                    ("large_objects", "SELECT count(*) FROM pg_largeobject_metadata"),
                    ("settings", "SELECT count(*) FROM pg_db_role_setting WHERE setrole <> 0 "
                                 "AND setrole NOT IN (SELECT oid FROM pg_roles)")):
                cur.execute(query)
                counts[name] = cur.fetchone()[0]
            return counts
    finally:
        conn.close()


def wait_for_agent_query(server: Server, timeout_s: float = 300) -> str:
    """The database the agent's hour-long query runs in (the newest usable pool holding the
    study, which another test may have built), once it runs."""
    conn = connect(server)
    deadline = time.monotonic() + timeout_s
    try:
        with conn.cursor() as cur:
            while time.monotonic() < deadline:
                cur.execute("SELECT datname FROM pg_stat_activity WHERE usename LIKE "
                            "'rwe\\_run\\_%' AND query LIKE '%pg_sleep(3600)%'")
                row = cur.fetchone()
                if row:
                    return str(row[0])
                time.sleep(0.2)
    finally:
        conn.close()
    raise AssertionError("the agent's query never started")


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed")
def test_kill_9_of_run_cell_leaves_nothing_after_the_next_command() -> None:
    from prefect.settings import PREFECT_API_URL

    from tasks_lib.rwe.pools import load_study

    _, admin = study_cluster()
    server = admin.model_copy(update={
        "database": load_study("statin-sepsis", built_pool().url).manifest.database})
    # Both commands run their flows on the session's Prefect server: what is killed and swept
    # is the cell's, not a temporary Prefect server of each command (~20 s CPU apiece).
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    cell = subprocess.Popen([MEDFLOWS, "run", "cell", "--agent", "rwe-dbhog", "--task",
                             "statin-sepsis"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True, env=env)
    try:
        server = server.model_copy(update={"database": wait_for_agent_query(server)})
        left = catalog(server)
        assert left["roles"] == left["schemas"] == 1 and left["sessions"] >= 1
    finally:
        os.kill(cell.pid, signal.SIGKILL)
        cell.wait(timeout=30)
    deadline = time.monotonic() + 15  # the role's guard outlives the command and drops it
    while catalog(server)["roles"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert catalog(server)["roles"] == 0

    nxt = subprocess.run([MEDFLOWS, "run", "cell", "--agent", "no-such-agent", "--task",
                          "statin-sepsis"], capture_output=True, text=True, timeout=300,
                         env=env)
    assert nxt.returncode != 0
    time.sleep(0.5)  # terminated backends leave pg_stat_activity asynchronously
    assert catalog(server) == {"roles": 0, "sessions": 0, "schemas": 0, "large_objects": 0,
                               "settings": 0}


def test_sweep_starts_no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks_lib.rwe.sweep import sweep

    monkeypatch.setenv("MEDFLOWS_RWE_CLUSTER_DIR", str(tmp_path / "cluster"))
    monkeypatch.delenv("MEDFLOWS_RWE_DB_URL", raising=False)
    monkeypatch.delenv("MEDFLOWS_RWE_DATABASE_URL", raising=False)
    reset_settings()
    try:
        started = time.monotonic()
        assert sweep() == []
        assert time.monotonic() - started < 1
        assert not (tmp_path / "cluster").exists()
    finally:
        monkeypatch.undo()
        reset_settings()


@pytest.mark.slow
def test_sweep_drops_roles_of_dead_owners_only(rwe_server: Server) -> None:
    from tasks_lib.rwe.roles import (
        create_role,
        drop_role,
        ensure_reader,
        leftover_roles,
        sweep_roles,
    )

    ensure_reader(rwe_server)

    child = ("import sys; from tasks_lib.rwe.cluster import Server; "
             "from tasks_lib.rwe.roles import create_role; "
             "create_role(Server.model_validate_json(sys.argv[1]), 'dead-owner')")
    subprocess.run([sys.executable, "-c", child, rwe_server.model_dump_json()], check=True,
                   timeout=60, cwd=Path(__file__).parents[3])
    live = create_role(rwe_server, "live-owner")
    assert sweep_roles(rwe_server) == ["rwe_run_dead_owner"]
    assert leftover_roles(rwe_server) == [live.name, live.scratch]
    drop_role(rwe_server, live.name)


@pytest.mark.slow
def test_the_guard_drops_the_role_when_its_owner_dies_and_ends_with_the_role(
        rwe_server: Server) -> None:
    from tasks_lib.processes import proc_start
    from tasks_lib.rwe.owners import Owner
    from tasks_lib.rwe.roles import (
        create_role,
        drop_role,
        ensure_reader,
        leftover_roles,
        start_guard,
    )

    ensure_reader(rwe_server)
    owner_process = subprocess.Popen(["sleep", "60"])
    owner = Owner.current(rwe_server.database).model_copy(update={
        "pid": owner_process.pid, "start": proc_start(owner_process.pid)})
    doomed = create_role(rwe_server, "guarded")
    guard = start_guard(rwe_server, doomed.name, owner, 60)
    time.sleep(1.5)
    assert doomed.name in leftover_roles(rwe_server)  # the owner lives: the guard waits
    owner_process.kill()
    owner_process.wait()
    assert guard.wait(timeout=15) == 0
    assert leftover_roles(rwe_server) == []

    kept = create_role(rwe_server, "kept")
    guard = start_guard(rwe_server, kept.name, Owner.current(rwe_server.database), 60)
    drop_role(rwe_server, kept.name)  # the normal teardown: the guard ends by itself
    assert guard.wait(timeout=15) == 0
