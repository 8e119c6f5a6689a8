"""Per-run database roles of the RWE sandbox (``../shared/specs/rwe.md`` §3 "Sandbox roles").

Once per database: a ``rwe_reader`` group role that may SELECT from the study schemas only (no
CONNECT anywhere); ``PUBLIC`` loses CONNECT on every database and CREATE on ``public``.
Per run: a login role ``rwe_run_<id>`` with CONNECT + TEMP on its pool's database only (each EHR
has its own database; random password, member of ``rwe_reader``, connection
limit, expiry, statement/idle timeouts, temp-file cap, no superuser/createdb/createrole/
replication) with its own ``scratch_<id>`` schema; dropped after the run whatever happened
(:func:`run_role` is a context manager; :func:`sweep_roles` removes roles a killed run left).
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from psycopg2 import sql
from pydantic import Field

from evaluators.core import Frozen
from tasks_lib.rwe.cluster import Server, connect
from tasks_lib.rwe.owners import Owner, parse_owner

READER = "rwe_reader"
"""Group role holding the read-only grants on the study schemas."""

ROLE_LIKE = r"rwe\_run\_%"
"""LIKE pattern of per-run role names."""

STUDY_SCHEMAS = ("mimiciv_hosp", "mimiciv_icu", "mimiciv_derived")
"""Schemas a run role may read (mimic-code's names)."""

LARGE_OBJECT_MAKERS = ("lo_creat(integer)", "lo_create(oid)", "lo_from_bytea(oid, bytea)",
                       "lo_import(text)", "lo_import(text, oid)")
"""Functions creating large objects (revoked from ``PUBLIC``: a large object lives outside every
schema, could be given to the shared reader role and outlive the run)."""

RUN_SETTINGS = (("log_statement", "all"), ("log_min_messages", "error"),
                ("log_min_error_statement", "panic"), ("client_connection_check_interval", "1s"))
"""Role settings besides the limits: every statement logged (superuser-only settings the role
cannot change, so a request caught in an exception handler is still seen), warnings and notices
not logged, no second copy of a failing statement, queries of vanished clients ended."""

DDL_LOCK = 0x52574552  # "RWER"
"""Advisory lock key serialising role DDL on the server: concurrent GRANT/REVOKE/DROP OWNED
change the same shared-catalog rows (``pg_database`` ACLs), which PostgreSQL refuses with "tuple
concurrently updated" (parallel cells of ``run matrix``)."""


@contextmanager
def role_ddl(server: Server) -> Iterator[None]:
    """Hold the server-wide role-DDL lock (advisory locks are per database, so it is taken in
    ``postgres``, which every cluster has)."""
    lock = connect(server, "postgres")
    try:
        with lock.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", (DDL_LOCK,))
        yield
    finally:
        lock.close()  # closing the session releases its advisory lock


class RoleLimits(Frozen):
    """Per-run limits (spec §3 defaults; the watchdog's in :mod:`tasks_lib.rwe.watchdog`).

    The role-level settings are defaults the session may change (``statement_timeout``,
    ``idle_in_transaction_session_timeout``, even with ``ALTER ROLE CURRENT_USER``); what
    counts is enforced outside the session: superuser-only settings (``temp_file_limit``,
    statement logging) and the host's watchdog (time, memory, scratch space, log volume).
    """

    connection_limit: int = Field(default=4, ge=1, description="Concurrent connections.")
    statement_timeout: str = Field(default="20min", description="statement_timeout.")
    idle_in_transaction: str = Field(default="5min",
                                     description="idle_in_transaction_session_timeout.")
    temp_file_limit: str = Field(default="1GB", description="temp_file_limit (per backend).")
    valid_for: timedelta = Field(default=timedelta(hours=2, minutes=15),
                                 description="Login expiry after creation.")
    statement_s: float = Field(default=20 * 60, gt=0, description="Statement time after "
                               "which the watchdog cancels, then terminates, a backend.")
    idle_in_transaction_s: float = Field(default=5 * 60, gt=0,
                                         description="Idle-in-transaction time the watchdog "
                                                     "allows before terminating.")
    backend_memory: int = Field(default=2**30, gt=0, description="Private memory (RssAnon, "
                                "bytes) of one backend before the watchdog terminates it.")
    scratch_bytes: int = Field(default=2 * 2**30, gt=0, description="Scratch, temporary and "
                               "uncommitted tables of the run, in bytes.")
    log_bytes: int = Field(default=32 * 2**20, gt=0, description="Server-log bytes the run's "
                           "role may produce.")
    poll_s: float = Field(default=0.25, gt=0, description="Watchdog interval.")


class RunRole(Frozen):
    """A run's database login (what the agent's connection helper holds)."""

    name: str = Field(description="Role name rwe_run_<id>.")
    password: str = Field(description="Random password (never logged).", repr=False)
    scratch: str = Field(description="The run's own schema scratch_<id>.")
    database: str = Field(description="Study database.")

    def dsn(self, host: str, port: int) -> str:
        """libpq DSN through ``host`` (a socket folder as the sandbox sees it)."""
        return (f"host={host} port={port} dbname={self.database} user={self.name} "
                f"password={self.password} options='-c search_path={self.scratch},public'")


def role_suffix(run_id: str) -> str:
    """A safe identifier suffix from a run id (lowercase letters, digits, underscores)."""
    suffix = re.sub(r"[^a-z0-9]+", "_", run_id.lower()).strip("_")
    if not suffix:
        raise ValueError(f"run id {run_id!r} gives no role name")
    return suffix[:40]


def ensure_reader(server: Server, schemas: tuple[str, ...] = STUDY_SCHEMAS) -> None:
    """Create ``rwe_reader`` and (re)apply its grants; lock ``PUBLIC`` out (idempotent)."""
    conn = connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (READER,))
            if cur.fetchone() is None:
                cur.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(READER)))
            cur.execute("SELECT datname FROM pg_database WHERE datallowconn")
            reader = sql.Identifier(READER)
            for (name,) in cur.fetchall():  # CONNECT goes to each run role, on its pool's db
                cur.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC, {}").format(
                    sql.Identifier(name), reader))
            cur.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
            cur.execute("REVOKE EXECUTE ON FUNCTION " + ", ".join(LARGE_OBJECT_MAKERS)
                        + " FROM PUBLIC")
            cur.execute("SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)",
                        (list(schemas),))
            for (name,) in cur.fetchall():
                schema = sql.Identifier(name)
                cur.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, reader))
                cur.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
                    schema, reader))
    finally:
        conn.close()


def create_role(server: Server, run_id: str, limits: RoleLimits | None = None) -> RunRole:
    """Create the run's login role and scratch schema (spec §3 statements)."""
    limits = limits or RoleLimits()
    suffix = role_suffix(run_id)
    role = RunRole(name=f"rwe_run_{suffix}", password=secrets.token_urlsafe(24),
                   scratch=f"scratch_{suffix}", database=server.database)
    until = (datetime.now(UTC) + limits.valid_for).isoformat()
    name = sql.Identifier(role.name)
    conn = connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute(sql.SQL(
                "CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {} CONNECTION LIMIT {} VALID UNTIL {} "
                "NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS").format(
                name, sql.Literal(role.password), sql.Identifier(READER),
                sql.Literal(limits.connection_limit), sql.Literal(until)))
            for setting, value in (("statement_timeout", limits.statement_timeout),
                                   ("idle_in_transaction_session_timeout",
                                    limits.idle_in_transaction),
                                   ("temp_file_limit", limits.temp_file_limit),
                                   *RUN_SETTINGS):
                cur.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(
                    name, sql.Identifier(setting), sql.Literal(value)))
            cur.execute(sql.SQL("COMMENT ON ROLE {} IS {}").format(
                name, sql.Literal(Owner.current(server.database).comment())))
            cur.execute(sql.SQL("GRANT CONNECT, TEMP ON DATABASE {} TO {}").format(
                sql.Identifier(server.database), name))
            cur.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                sql.Identifier(role.scratch), name))
    finally:
        conn.close()
    return role


def drop_role(server: Server, name: str) -> None:
    """End the role's sessions, drop its scratch schema and everything it owns, drop it."""
    suffix = name.removeprefix("rwe_run_")
    conn = connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE usename = %s", (name,))
            cur.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(f"scratch_{suffix}")))
            cur.execute("SELECT lo_unlink(m.oid) FROM pg_largeobject_metadata m "
                        "JOIN pg_roles r ON r.oid = m.lomowner WHERE r.rolname IN (%s, %s)",
                        (name, READER))
            cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
            if cur.fetchone() is not None:
                cur.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
                cur.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
    finally:
        conn.close()


def leftover_roles(server: Server) -> list[str]:
    """``rwe_run_%`` roles and ``scratch_%`` schemas still present (after runs: none)."""
    conn = connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s UNION ALL "
                        "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s ORDER BY 1",
                        (ROLE_LIKE, r"scratch\_%"))
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


def stale_roles(server: Server, expired_only: bool = True) -> list[tuple[str, str]]:
    """Run roles a killed run left behind, with the database each may connect to: those whose
    recorded owner process is gone, or past their expiry (any, unless ``expired_only``)."""
    conn = connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT rolname, rolvaliduntil < now(), shobj_description(oid, "
                        "'pg_authid') FROM pg_roles WHERE rolname LIKE %s ORDER BY 1",
                        (ROLE_LIKE,))
            rows = cur.fetchall()
    finally:
        conn.close()
    stale = []
    for name, expired, comment in rows:
        owner = parse_owner(comment)
        if expired or not expired_only or (owner is not None and owner.alive() is False):
            stale.append((name, owner.database if owner is not None else server.database))
    return stale


def sweep_roles(server: Server, expired_only: bool = True) -> list[str]:
    """Drop run roles a killed run left behind (:func:`stale_roles`); the names dropped."""
    names = []
    for name, database in stale_roles(server, expired_only):
        drop_role(server.model_copy(update={"database": database}), name)
        names.append(name)
    return names


def start_guard(server: Server, role: str, owner: Owner, valid_s: float
                ) -> subprocess.Popen[bytes]:
    """Start the guard of ``role`` (owned by ``owner``) in the background; its process."""
    guard = subprocess.Popen([sys.executable, "-m", "tasks_lib.rwe.guard"],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True,
                             cwd=Path(__file__).resolve().parents[2])
    assert guard.stdin is not None
    guard.stdin.write(json.dumps({"server": server.model_dump(mode="json"), "role": role,
                                  "owner": owner.model_dump(mode="json"),
                                  "valid_s": valid_s}).encode())
    guard.stdin.close()
    return guard


@contextmanager
def run_role(server: Server, run_id: str, limits: RoleLimits | None = None
             ) -> Iterator[RunRole]:
    """The run's role for the duration of the ``with`` block, dropped afterwards even when the
    block raises (a teardown failure is raised loudly: a platform bug, spec §7); a guard process
    drops it should this process die first (:mod:`tasks_lib.rwe.guard`)."""
    limits = limits or RoleLimits()
    with role_ddl(server):
        sweep_roles(server)
        ensure_reader(server)
        role = create_role(server, run_id, limits)
    start_guard(server, role.name, Owner.current(server.database),
                limits.valid_for.total_seconds())
    try:
        yield role
    finally:
        with role_ddl(server):
            drop_role(server, role.name)
        left = [n for n in leftover_roles(server) if n in (role.name, role.scratch)]
        if left:
            raise RuntimeError(f"RWE teardown left {', '.join(left)} behind")
