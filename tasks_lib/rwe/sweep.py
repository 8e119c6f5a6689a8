"""Sweep of what killed RWE runs left on the study server: run roles whose owning process is
gone (or past their expiry), with their sessions, scratch schemas, large objects and role
settings; and the server log of medflows' cluster, emptied when no run is active.

Called at the start of every RWE cell and by :mod:`tasks_lib.sweep` at the start of ``run
cell`` / ``run matrix``. A run role records its owner (:mod:`tasks_lib.rwe.owners`), so a role of
a live run (another process on this host) is never touched.
"""

from __future__ import annotations

import logging
import os

import psycopg2

from tasks_lib.rwe.cluster import Server, connect, default_cluster, server_from_url
from tasks_lib.rwe.roles import ROLE_LIKE, role_ddl, sweep_roles
from tasks_lib.settings import get_settings

log = logging.getLogger(__name__)

LOG_KEEP = 64 * 2**20
"""Server-log size above which the sweep empties it (only while no run role exists)."""


def running_server() -> Server | None:
    """The study server if it can be reached without starting anything (None: medflows'
    cluster is not running and no ``MEDFLOWS_RWE_DB_URL`` is set)."""
    url = get_settings().rwe_db_url
    if url:
        return server_from_url(url)
    cluster = default_cluster()
    if cluster.pid() is None or not cluster.pwfile.is_file():
        return None
    return cluster.server()


def trim_log(server: Server) -> str | None:
    """Empty medflows' cluster log when it is over :data:`LOG_KEEP` and no run is active
    (the server appends, so it goes on writing at the new end); what was done, if anything."""
    if server.socket_dir is None:
        return None
    path = default_cluster().log
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size <= LOG_KEEP:
        return None
    conn = connect(server, "postgres")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_roles WHERE rolname LIKE %s", (ROLE_LIKE,))
            row = cur.fetchone()
    finally:
        conn.close()
    if row is None or row[0]:
        return None
    os.truncate(path, 0)
    return f"emptied the study server's log ({size} bytes, no run active)"


def sweep() -> list[str]:
    """Remove run roles whose owning process is gone; short descriptions of what was removed.

    Cheap, and never starts a cluster: with medflows' cluster stopped and no
    ``MEDFLOWS_RWE_DB_URL`` set there is nothing to sweep. An unreachable server is logged
    and skipped (the run that needs it reports it).
    """
    server = running_server()
    if server is None:
        return []
    try:
        with role_ddl(server):
            done = [f"dropped RWE run role {name} (owner gone or expired): its sessions, "
                    "scratch schema, large objects and settings" for name in sweep_roles(server)]
            trimmed = trim_log(server)
    except psycopg2.Error as exc:
        log.warning("RWE sweep skipped: study server unreachable: %s", str(exc).strip())
        return []
    return done + ([trimmed] if trimmed else [])
