"""A run role's guard: a small process that outlives the command which created the role and
drops the role (its sessions, scratch schema, large objects) as soon as that command dies —
``kill -9`` included — instead of waiting for the next command's sweep.

:func:`tasks_lib.rwe.roles.start_guard` runs ``python -m tasks_lib.rwe.guard`` in its own
session (a signal to the command's process group does not reach it), handing it the admin
connection on stdin (never on the command line). It checks every :data:`POLL_S` and ends by
itself when the role is gone (the normal teardown), when the server is gone, or after the role's
validity plus a margin.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import suppress

import psycopg2

from tasks_lib.rwe.cluster import Server, connect
from tasks_lib.rwe.owners import Owner
from tasks_lib.rwe.roles import drop_role, role_ddl

POLL_S = 1.0
"""Seconds between two looks at the owner and the role."""

MARGIN_S = 600.0
"""How long past the role's validity the guard may live."""


def watch(server: Server, role: str, owner: Owner, valid_s: float) -> bool:
    """Wait until the role is gone or its owner dies; True when the owner died first."""
    end = time.monotonic() + valid_s + MARGIN_S
    conn = connect(server)
    try:
        with conn.cursor() as cur:
            while time.monotonic() < end:
                cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
                if cur.fetchone() is None:
                    return False
                if owner.alive() is False:
                    break
                time.sleep(POLL_S)
            else:
                return False
    finally:
        conn.close()
    with role_ddl(server):
        drop_role(server, role)
    return True


def main() -> None:
    """Entry point of the guard process (its arguments come on stdin as JSON)."""
    args = json.loads(sys.stdin.read())
    with suppress(psycopg2.Error):  # the server is gone: the next command's sweep takes over
        watch(Server.model_validate(args["server"]), str(args["role"]),
              Owner.model_validate(args["owner"]), float(args["valid_s"]))


if __name__ == "__main__":
    main()
