"""Refused database requests of a run, read from the study server's log (isolation judged by
effect, like the sandbox's own monitor).

medflows' cluster logs every error with ``user=<role>`` (:data:`tasks_lib.rwe.cluster.LOG_PREFIX`).
A refused privilege of the run's role is attributed to the run by name; a failed password login
(as ``postgres``, the admin or another run's role) names the role it tried, so it is attributed by
time: it happened while the run's sandbox was executing code. An external server
(``MEDFLOWS_RWE_DB_URL``) has no readable log: the role's grants still refuse the requests, but
they are not recorded as violations.
"""

from __future__ import annotations

import re
from pathlib import Path

from tasks_lib.sandbox.base import Source, Violation, ViolationKind

REFUSED = re.compile(r"(permission denied|must be superuser|must be owner|must be member|"
                     r"only superuser|does not have CONNECT privilege|password authentication "
                     r"failed|no pg_hba\.conf entry|too many connections for role)", re.I)
"""Server messages that mean a request was refused by the sandbox's rules."""

MAX_READ = 4 * 2**20
"""Log bytes read per check (a flood is truncated, never loaded whole)."""


class LogWatch:
    """Reads the server log from where the previous check stopped.

    Args:
        path: the server log (None: an external server, nothing is watched).
        role: the run's role name.
    """

    def __init__(self, path: Path | None, role: str) -> None:
        self.path, self.role = path, role
        self.offset = path.stat().st_size if path is not None and path.exists() else 0

    def check(self) -> list[Violation]:
        """Violations in the lines written since the last check."""
        if self.path is None or not self.path.exists():
            return []
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read(MAX_READ)
            self.offset = fh.tell()
        found = []
        for line in data.decode("utf-8", "replace").splitlines():
            if not (" ERROR: " in line or " FATAL: " in line) or not REFUSED.search(line):
                continue
            mine = f"user={self.role} " in line
            login = "authentication failed" in line or "pg_hba.conf" in line
            if mine or login:
                evidence = line.split(" ERROR: ", 1)[-1].split(" FATAL: ", 1)[-1]
                found.append(Violation(kind=ViolationKind.DATABASE_ACCESS, source=Source.SANDBOX,
                                       evidence=evidence.strip()[:300]))
        return found
