"""Refused and forbidden database requests of a run, read from the study server's log
(isolation judged by what reached the server, like the sandbox's own monitor).

medflows' cluster prefixes every line with ``user=<role>``
(:data:`tasks_lib.rwe.cluster.LOG_PREFIX`) and a run role has ``log_statement = all`` (a
superuser-only setting it cannot change), so:

* every statement of the run is in the log, also one whose error a PL/pgSQL ``EXCEPTION``
  block caught (such errors never reach the log): a statement naming a forbidden object (a
  schema outside the study schemas and the run's scratch, server files and programs, the role
  catalogue, large objects, roles and grants) is a violation, whether it failed or not;
* a refused privilege of the run's role (``permission denied`` …) is a violation;
* a failed password login (as ``postgres``, the admin or another run's role) names the role it
  tried, so it is attributed by time: it happened while the run was being watched.

The reader streams every byte written since the previous check in bounded chunks (a flood is
read through, never loaded whole and never skipped), and counts the bytes the run's role wrote
(:attr:`LogWatch.role_bytes`, capped by the watchdog). An external server
(``MEDFLOWS_RWE_DB_URL``) has no readable log: the role's grants still refuse the requests, but
they are not recorded as violations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from tasks_lib.sandbox.base import Source, Violation, ViolationKind

REFUSED = re.compile(r"(permission denied|must be superuser|must be owner|must be member|"
                     r"only superuser|does not have CONNECT privilege|password authentication "
                     r"failed|no pg_hba\.conf entry|too many connections for role)", re.I)
"""Server messages that mean a request was refused by the sandbox's rules."""

FORBIDDEN = re.compile(
    r"\b(pg_authid|pg_shadow|pg_user_mappings?|pg_read_(?:binary_)?file|pg_ls_\w+|pg_stat_file|"
    r"pg_file_\w+|lo_import|lo_export|lo_creat\w*|lo_from_bytea|pg_largeobject\w*|dblink\w*|"
    r"pg_reload_conf|pg_rotate_logfile|pg_promote|"
    r"copy\b[^;]*?\b(?:program|(?:from|to)\s+')|"
    r"set\s+(?:session\s+)?role|set\s+session\s+authorization|"
    r"alter\s+(?:role|user|group|system|large\s+object|default\s+privileges|database)|"
    r"create\s+(?:role|user|group|extension|database|schema|event\s+trigger|"
    r"publication|subscription|server)|grant|revoke|owner\s+to)\b", re.I)
"""What a study analysis never sends: server files and programs, the role catalogue, large
objects, changes of roles, grants or ownership (matched in the run role's logged statements)."""

SCRATCH = re.compile(r"\bscratch_[a-z0-9_]+\b", re.I)
"""A run's scratch schema (another run's, created after this run started, included)."""

ENTRY = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \S+ \[\d+\] ")
"""Start of a log entry (the prefix); other lines continue the previous entry."""

CHUNK = 2**20
"""Bytes read at a time."""

MAX_LINE = 2**20
"""Longest piece of one line held at once (a longer line is scanned piecewise)."""

PER_CHECK = 4 * CHUNK
"""Bytes read per check at most: a check returns so the watchdog can weigh what the role wrote
so far (a flood written faster than it is read would otherwise keep one check reading forever);
the rest is read by the next checks, never skipped."""

MAX_FOUND = 50
"""Violations kept per check (a flood of refusals is counted, not listed)."""


class LogWatch:
    """Reads the server log from where the previous check stopped.

    Args:
        path: the server log (None: an external server, nothing is watched).
        role: the run's role name.
        schemas: schema names the role may name (study schemas, its scratch schema); any
            other non-system schema named in :meth:`forbid_schemas` is a violation.
    """

    def __init__(self, path: Path | None, role: str, schemas: Iterable[str] = ()) -> None:
        self.path, self.role = path, role
        self.offset = path.stat().st_size if path is not None and path.exists() else 0
        self.allowed = {s.lower() for s in schemas}
        self.schemas: re.Pattern[str] | None = None
        self.role_bytes = 0
        self._tag = f" user={role} ".encode()
        self._mine = False
        self._carry = b""

    def forbid_schemas(self, names: Iterable[str]) -> None:
        """Schemas of the database the role must not name (the allowed ones are skipped)."""
        other = sorted({n for n in names if n.lower() not in self.allowed})
        self.schemas = (re.compile(r"\b(" + "|".join(map(re.escape, other)) + r")\b", re.I)
                        if other else None)

    def check(self, limit: int | None = PER_CHECK) -> list[Violation]:
        """Violations in what was written since the last check: at most ``limit`` bytes (None:
        to the end), read in bounded chunks; the next check goes on from there."""
        if self.path is None or not self.path.exists():
            return []
        found: list[Violation] = []
        with self.path.open("rb") as fh:
            if fh.seek(0, 2) < self.offset:  # emptied by the sweep while no run was active
                self.offset, self._carry = 0, b""
            fh.seek(self.offset)
            budget = limit
            while (budget is None or budget > 0) and (chunk := fh.read(CHUNK)):
                budget = None if budget is None else budget - len(chunk)
                self.offset += len(chunk)
                self._scan(self._carry + chunk, found)
        return found[:MAX_FOUND]

    def drain_actions(self) -> list[str]:
        """The log reader acts on nothing (the watchdog does)."""
        return []

    def _scan(self, data: bytes, found: list[Violation]) -> None:
        lines = data.split(b"\n")
        self._carry = lines.pop()
        if len(self._carry) > MAX_LINE:  # a huge line: scan what is there, keep the tail
            lines.append(self._carry[:-256])
            self._carry = self._carry[-256:]
        for line in lines:
            if ENTRY.match(line):
                self._mine = self._tag in line[:200]
                self._entry(line, found)
            elif self._mine:
                self.role_bytes += len(line) + 1
                self._statement(line.decode("utf-8", "replace"), found)

    def _entry(self, raw: bytes, found: list[Violation]) -> None:
        if self._mine:
            self.role_bytes += len(raw) + 1
        head = raw[:300]
        statement = b" LOG:  statement: " in head or b" LOG:  execute " in head
        if self._mine and statement:
            self._statement(raw.decode("utf-8", "replace").split(" LOG:  ", 1)[1], found)
            return
        if b" ERROR: " not in head and b" FATAL: " not in head:
            return
        line = raw.decode("utf-8", "replace")
        if not REFUSED.search(line):
            return
        login = "authentication failed" in line or "pg_hba.conf" in line
        if self._mine or login:
            evidence = line.split(" ERROR: ", 1)[-1].split(" FATAL: ", 1)[-1]
            self._add(found, evidence)

    def _statement(self, text: str, found: list[Violation]) -> None:
        hit = (FORBIDDEN.search(text) or (self.schemas.search(text) if self.schemas else None)
               or next((m for m in SCRATCH.finditer(text)
                        if m.group(0).lower() not in self.allowed), None))
        if hit is not None:
            start = max(0, hit.start() - 60)
            self._add(found, f"statement naming {hit.group(0)!r}: …{text[start:hit.end() + 60]}…")

    @staticmethod
    def _add(found: list[Violation], evidence: str) -> None:
        if len(found) < MAX_FOUND:
            found.append(Violation(kind=ViolationKind.DATABASE_ACCESS, source=Source.SANDBOX,
                                   evidence=" ".join(evidence.split())[:300]))
