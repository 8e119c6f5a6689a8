"""The bottom layer: the shared vocabulary and the two failure classes (ARCHITECTURE §2–§6).

Evaluators, judges, steps and flows all speak these words; nothing here imports from the rest
of the project, so pure evaluator code (and an offline evaluator container) can use them.

* :class:`InvalidSubmissionError`: the agent's fault. Recorded on the score card with a reason
  and scored by policy; the flow goes on.
* :class:`InputDataError`: the user's fault (a malformed file, flag or card). It names the file
  (and line) and what is wrong; the CLI prints one ``error:`` line and exits 2.

Every other exception is our bug and propagates.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from evaluators.registry import Registry, UnknownNameError
from evaluators.vocabulary import (
    TRACK_NAME,
    InputDataError,
    InvalidSubmissionError,
    RunStatus,
    Stage,
    Tier,
    Track,
)

__all__ = [
    "TRACK_NAME",
    "Frozen",
    "InputDataError",
    "InvalidSubmissionError",
    "Registry",
    "RunStatus",
    "Stage",
    "Tier",
    "Track",
    "UnknownNameError",
]


class Frozen(BaseModel):
    """Base of every boundary type: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")
