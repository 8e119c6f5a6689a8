"""Domain vocabulary and the typed objects that cross step, flow, file and database boundaries."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Base of every boundary type: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Track(StrEnum):
    """A family of tasks sharing one evaluator."""

    QA = "qa"
    SEGMENTATION = "segmentation"
    ENHANCEMENT = "enhancement"
    VQA = "vqa"
    REPORT_GENERATION = "report_generation"
    DETECTION = "detection"
    CHALLENGE = "challenge"
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
    INVALID = "invalid"
    ERROR = "error"


class SelectionRule(StrEnum):
    """How hard items are chosen per dataset."""

    FIRST = "first"
    STRATIFIED = "stratified"
