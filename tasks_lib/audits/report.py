"""What the exploit audit reports: one :class:`Finding` per check, the :class:`AuditReport` of a
pool version, and the :class:`GateRecord` the publish gate writes to the pool's ``audit.json``."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from evaluators.core import Track
from tasks_lib.domain import Frozen

CHECKS = ("null_agents", "answer_key", "grader_tampering", "judge_injection", "egress")


class Severity(StrEnum):
    """How bad a failed check is: ``error`` blocks publishing, ``warning`` is reported only."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Finding(Frozen):
    """The outcome of one audit check."""

    check: str = Field(description="Check name (one of CHECKS).")
    passed: bool = Field(description="The check ran and found nothing.")
    severity: Severity = Field(description="error (blocks publishing), warning, info.")
    rule: str = Field(description="What the check requires, with its floor or tolerance.")
    evidence: list[str] = Field(default_factory=list,
                                description="Each hit: the file/item, the rule, what it leaks.")


class AuditReport(Frozen):
    """The exploit audit of one pool version."""

    pool_url: str = Field(description="Root URL of the audited pool.")
    pool_id: str = Field(description="Pool id (task id of an imaging pool).")
    version: int = Field(description="Pool version.")
    pool_hash: str = Field(description="Content hash of the pool version.")
    track: Track = Field(description="Track of the pool.")
    created_at: datetime = Field(description="When the audit ran (UTC).")
    findings: list[Finding] = Field(description="One finding per check.")

    @property
    def clean(self) -> bool:
        """No failed finding of severity ``error`` (warnings, e.g. a skipped probe, are shown
        but do not block)."""
        return all(f.passed or f.severity is not Severity.ERROR for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict with ``clean`` included."""
        return {**self.model_dump(mode="json"), "clean": self.clean}


class GateRecord(Frozen):
    """What :func:`~tasks_lib.audit.require_clean` writes to the pool's ``audit.json``."""

    report: dict[str, Any] = Field(description="The audit report (with ``clean``).")
    override: str | None = Field(description="Why an unclean pool was published anyway.")
    decided_at: datetime = Field(description="When the gate passed (UTC).")
