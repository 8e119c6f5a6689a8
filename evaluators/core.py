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

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from evaluators.registry import Registry, UnknownNameError

__all__ = [
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


class Track(StrEnum):
    """A family of tasks sharing one kit (``tasks_lib/tracks/``)."""

    QA = "qa"
    SEGMENTATION = "segmentation"
    ENHANCEMENT = "enhancement"
    VQA = "vqa"
    REPORT_GENERATION = "report_generation"
    DETECTION = "detection"
    CHALLENGE = "challenge"
    MEDBENCH = "medbench"
    RWE = "rwe"


class Tier(StrEnum):
    """How much scaffolding the brief gives (same data, metric and time)."""

    LITE = "lite"
    STANDARD = "standard"
    PRO = "pro"


class Stage(StrEnum):
    """AutoMedBench workflow stages."""

    S1 = "s1"
    S2 = "s2"
    S3 = "s3"
    S4 = "s4"
    S5 = "s5"


class RunStatus(StrEnum):
    """Terminal state of a run."""

    COMPLETED = "completed"
    TIMEOUT = "timeout"
    PARTIAL = "partial"
    """Stopped early by its cost budget (what it answered is kept; re-run to resume)."""
    INVALID = "invalid"
    ERROR = "error"


class InvalidSubmissionError(ValueError):
    """A submission breaks the task's IO contract (the agent's fault): evaluators raise it where
    they detect it (a prediction of the wrong shape, a detection without a score, …)."""


class InputDataError(ValueError):
    """Input data is malformed; the message names the file (and line) and what is wrong."""

    def __init__(self, source: str, reason: str, line: int | None = None) -> None:
        self.source, self.reason, self.line = source, reason, line
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")
