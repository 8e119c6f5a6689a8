"""Who owns a run role: the host process that created it (pid, its start time, host name),
recorded as the role's comment so a later command can tell a live run from a killed one."""

from __future__ import annotations

import json
import os
import socket

from pydantic import Field, ValidationError

from evaluators.core import Frozen
from tasks_lib.processes import proc_start

MARK = "medflows-run "
"""Prefix of a run role's comment (the JSON of :class:`Owner` follows)."""


class Owner(Frozen):
    """The process that created a run role."""

    pid: int = Field(description="Process id of the creating command.")
    start: int | None = Field(description="Its start time (clock ticks since boot).")
    host: str = Field(description="Host name it ran on.")
    database: str = Field(description="Pool database the role may connect to.")

    @classmethod
    def current(cls, database: str) -> Owner:
        """This process as the owner of a role on ``database``."""
        pid = os.getpid()
        return cls(pid=pid, start=proc_start(pid), host=socket.gethostname(),
                   database=database)

    def comment(self) -> str:
        """The role comment recording this owner."""
        return MARK + self.model_dump_json()

    def alive(self) -> bool | None:
        """The owner still runs (None: another host, cannot be told from here)."""
        if self.host != socket.gethostname():
            return None
        return self.start is not None and proc_start(self.pid) == self.start


def parse_owner(comment: str | None) -> Owner | None:
    """The owner recorded in a role comment (None: not a medflows run comment)."""
    if not comment or not comment.startswith(MARK):
        return None
    try:
        return Owner.model_validate(json.loads(comment[len(MARK):]))
    except (ValueError, ValidationError):
        return None
