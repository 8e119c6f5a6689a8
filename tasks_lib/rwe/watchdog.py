"""The host-side watchdog of one RWE run: limits enforced from outside the agent's sessions.

A role may ``SET statement_timeout = 0``, ``SET work_mem = '3GB'`` or ``ALTER ROLE CURRENT_USER
SET …``; none of that reaches this thread, which polls the server as its admin every
``poll_s`` and

* cancels (``pg_cancel_backend``), then after :data:`GRACE_S` terminates, a backend of the run's
  role whose statement runs past ``statement_s``, and terminates one idle in a transaction past
  ``idle_in_transaction_s`` (time limits: the query ends, the run goes on);
* terminates a backend whose private memory (``RssAnon`` of ``/proc/<pid>/status``, medflows'
  own cluster only) passes ``backend_memory`` (a ``resource_limit`` violation);
* terminates every backend of the role and locks it (``NOLOGIN``) when the run's tables
  (scratch, temporary, given to the shared reader role, and uncommitted ones still being
  written) pass ``scratch_bytes``, when the role wrote more than ``log_bytes`` to the server
  log, or at the run's deadline — each a ``resource_limit`` violation except the deadline (the
  loop's own timeout);
* reads the server log continuously (:class:`~tasks_lib.rwe.dblog.LogWatch`);
* after every code execution (:meth:`Watchdog.check`) ends the sessions the code left: a
  session still running a query once the code has returned belongs to a detached client (a
  background process, a query sent without waiting) and is a ``resource_limit`` violation.

A watchdog that loses the server records a ``monitor_lost`` violation (the run cannot be
vouched for).
"""

from __future__ import annotations

import glob
import os
import threading
import time
from pathlib import Path

import psycopg2
from psycopg2 import sql

from tasks_lib.rwe.cluster import Server, connect
from tasks_lib.rwe.dblog import LogWatch
from tasks_lib.rwe.roles import READER, RoleLimits
from tasks_lib.sandbox.base import Source, Violation, ViolationKind

GRACE_S = 2.0
"""Seconds between the cancel and the terminate of an overlong statement."""

SETTLE_S = 1.0
"""How long the sessions of finished code may take to close by themselves."""

SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast", "public")

ACTIVITY = ("SELECT pid, state, extract(epoch FROM now() - query_start), "
            "extract(epoch FROM now() - state_change) FROM pg_stat_activity "
            "WHERE usename = %s AND pid <> pg_backend_pid()")

OWNED_BYTES = ("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
               "JOIN pg_roles r ON r.oid = c.relowner WHERE r.rolname IN (%s, %s) "
               "AND c.relkind IN ('r', 'm', 'p')")

UNCOMMITTED = ("SELECT DISTINCT l.relation FROM pg_locks l JOIN pg_stat_activity a "
               "ON a.pid = l.pid WHERE a.usename = %s AND l.locktype = 'relation' "
               "AND l.database = (SELECT oid FROM pg_database WHERE datname = "
               "current_database()) AND NOT EXISTS (SELECT 1 FROM pg_class c "
               "WHERE c.oid = l.relation)")


def private_memory(pid: int) -> int | None:
    """``RssAnon`` of a process in bytes (None: not readable)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def files_bytes(folder: Path, relation: int) -> int:
    """Bytes on disk of a relation's data files (also a temporary one's) in ``folder``."""
    total = 0
    for pattern in (f"{relation}", f"{relation}.*", f"t*_{relation}", f"t*_{relation}.*"):
        for path in glob.glob(str(folder / pattern)):
            try:
                total += os.stat(path).st_size
            except OSError:
                continue
    return total


class Watchdog:
    """Watches one run's role (see the module doc); use as a context manager.

    Args:
        server: admin connection to the run's database.
        role: the run's role name.
        limits: the run's limits.
        log: the log reader of the run (its path None: an external server).
        data_dir: medflows' cluster data folder (None: an external server, no memory or
            uncommitted-table checks).
        deadline_s: seconds from start after which every session of the role is ended.
    """

    def __init__(self, server: Server, role: str, limits: RoleLimits, log: LogWatch,
                 data_dir: Path | None, deadline_s: float) -> None:
        self.server, self.role, self.limits, self.log = server, role, limits, log
        self.data_dir, self.deadline = data_dir, time.monotonic() + deadline_s
        self.found: list[Violation] = []
        self.actions: list[str] = []
        self.locked = False
        self._cancelled: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rwe-watchdog-{role}",
                                        daemon=True)
        self._base: Path | None = None

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if not self._thread.is_alive():  # what the last ticks left unread
            for v in self.log.check(limit=None):
                self._record(v.kind, v.evidence)

    def _record(self, kind: ViolationKind, evidence: str) -> None:
        with self._lock:
            self.found.append(Violation(kind=kind, source=Source.SANDBOX, evidence=evidence))

    def check(self) -> list[Violation]:
        """After a code execution: end the sessions it left; violations since the last call."""
        if self._thread.is_alive():
            self._settle()
        with self._lock:
            found, self.found = self.found, []
        return found

    def drain_actions(self) -> list[str]:
        """What the watchdog did since the last call (cancels, terminations), for the trace."""
        with self._lock:
            actions, self.actions = self.actions, []
        return actions

    def _run(self) -> None:
        try:
            conn = connect(self.server)
        except psycopg2.Error as exc:
            self._record(ViolationKind.MONITOR_LOST, f"database watchdog: {exc}".strip()[:300])
            return
        try:
            with conn.cursor() as cur:
                self._prepare(cur)
                while not self._stop.is_set():
                    self._tick(cur)
                    self._stop.wait(self.limits.poll_s)
                self._tick(cur)
        except psycopg2.Error as exc:
            self._record(ViolationKind.MONITOR_LOST, f"database watchdog stopped: {exc}"[:300])
        finally:
            conn.close()

    def _prepare(self, cur: psycopg2.extensions.cursor) -> None:
        cur.execute("SELECT nspname FROM pg_namespace WHERE NOT (nspname = ANY(%s) OR "
                    "nspname LIKE 'pg\\_temp\\_%%' OR nspname LIKE 'pg\\_toast\\_temp\\_%%')",
                    (list(SYSTEM_SCHEMAS),))
        self.log.forbid_schemas(r[0] for r in cur.fetchall())
        cur.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
        row = cur.fetchone()
        if self.data_dir is not None and row is not None:
            self._base = self.data_dir / "base" / str(row[0])

    def _tick(self, cur: psycopg2.extensions.cursor) -> None:
        cur.execute(ACTIVITY, (self.role,))
        rows = cur.fetchall()
        for pid, state, running, idle in rows:
            self._time(cur, pid, state, running or 0.0, idle or 0.0)
        memory = [(pid, private_memory(pid)) for pid, *_ in rows] if self._base else []
        for pid, m in memory:
            if m is not None and m > self.limits.backend_memory:
                cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
                self._record(ViolationKind.RESOURCE_LIMIT, f"backend {pid} of the run's role "
                             f"used {m >> 20} MiB of private memory (limit "
                             f"{self.limits.backend_memory >> 20} MiB): terminated")
        used = self._scratch(cur)
        if used > self.limits.scratch_bytes:
            self._breach(cur, f"the run's tables hold {used >> 20} MiB (scratch, temporary and "
                              f"uncommitted; limit {self.limits.scratch_bytes >> 20} MiB)")
        for v in self.log.check():
            self._record(v.kind, v.evidence)
        if self.log.role_bytes > self.limits.log_bytes:
            self._breach(cur, f"the run's role wrote {self.log.role_bytes >> 20} MiB to the "
                              f"server log (limit {self.limits.log_bytes >> 20} MiB)")
        if time.monotonic() > self.deadline and not self.locked:
            self._lockout(cur)
            with self._lock:
                self.actions.append("run deadline: every session ended, role locked")

    def _time(self, cur: psycopg2.extensions.cursor, pid: int, state: str | None,
              running: float, idle: float) -> None:
        limit = self.limits.statement_s
        if state == "active" and running > limit + GRACE_S and pid in self._cancelled:
            cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
            note = f"backend {pid}: statement past {limit:g}s, terminated"
        elif state == "active" and running > limit and pid not in self._cancelled:
            self._cancelled.add(pid)
            cur.execute("SELECT pg_cancel_backend(%s)", (pid,))
            note = f"backend {pid}: statement past {limit:g}s, cancelled"
        elif (state or "").startswith("idle in transaction") and \
                idle > self.limits.idle_in_transaction_s:
            cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
            note = f"backend {pid}: idle in a transaction past " \
                   f"{self.limits.idle_in_transaction_s:g}s, terminated"
        else:
            if state != "active":
                self._cancelled.discard(pid)
            return
        with self._lock:
            self.actions.append(note)

    def _scratch(self, cur: psycopg2.extensions.cursor) -> int:
        cur.execute(OWNED_BYTES, (self.role, READER))
        row = cur.fetchone()
        used = int(row[0]) if row else 0
        if self._base is not None:
            cur.execute(UNCOMMITTED, (self.role,))
            used += sum(files_bytes(self._base, r[0]) for r in cur.fetchall())
        return used

    def _breach(self, cur: psycopg2.extensions.cursor, evidence: str) -> None:
        if not self.locked:
            self._record(ViolationKind.RESOURCE_LIMIT, evidence + ": every session of the run "
                                                                  "ended, its role locked")
        self._lockout(cur)

    def _lockout(self, cur: psycopg2.extensions.cursor) -> None:
        if not self.locked:
            cur.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(self.role)))
            self.locked = True
        cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                    (self.role,))

    def _settle(self) -> None:
        """End the role's sessions left after a code execution (a running one: violation)."""
        conn = connect(self.server)
        try:
            with conn.cursor() as cur:
                end = time.monotonic() + SETTLE_S
                while True:
                    cur.execute(ACTIVITY, (self.role,))
                    rows = cur.fetchall()
                    if not rows or time.monotonic() >= end:
                        break
                    time.sleep(0.05)
                running = [pid for pid, state, *_ in rows if state == "active"]
                for pid, *_ in rows:
                    cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
        finally:
            conn.close()
        if running:
            self._record(ViolationKind.RESOURCE_LIMIT,
                         f"{len(running)} database session(s) still running a query after the "
                         "code ended (a detached client): terminated")
