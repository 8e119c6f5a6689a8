"""The two failure classes (ARCHITECTURE §6).

* :class:`InvalidSubmissionError` and friends: the agent's fault. Recorded on the score card with
  a reason and scored by policy; the flow goes on.
* :class:`InputDataError`: our input data is wrong (a malformed file, an unknown card). It names
  the file and line and stops the step loudly. Every other exception is a bug and propagates.
"""

from __future__ import annotations


class InvalidSubmissionError(Exception):
    """A submission breaks the task's IO contract (the agent's fault)."""


class InputDataError(ValueError):
    """Input data is malformed; the message names the file (and line) and what is wrong."""

    def __init__(self, source: str, reason: str, line: int | None = None) -> None:
        self.source, self.reason, self.line = source, reason, line
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")
