"""Boundary types of the imaging tracks: pool manifest, submission frame rows, score card."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from tasks_lib.domain import Frozen, Track

EVALUATOR_VERSION = "imaging-1"
"""Tag on every imaging score card; bump when a metric or policy changes."""


class Visibility(StrEnum):
    """Which prefix of the pool root a file goes under."""

    PUBLIC = "public"
    PRIVATE = "private"


class Artifact(Frozen):
    """One file of a pool before it is written."""

    key: str = Field(description="Key relative to its visibility prefix, e.g. 'inputs/c-000.npy'.")
    visibility: Visibility = Field(description="public (agent-visible) or private (references).")
    data: bytes = Field(description="File content.")


class CaseEntry(Frozen):
    """One expected submission unit (an image, a volume or a question)."""

    case_id: str = Field(description="Identifier the submission must use.")
    output: str = Field(description="Submission file (relative) that carries this case.")
    reference: str = Field(description="Private key holding the reference.")
    shape: list[int] = Field(default_factory=list, description="Expected array shape (if any).")
    spacing: list[float] = Field(default_factory=list, description="Voxel spacing in mm.")
    origin: str = Field(default="", description="Provenance of the case (source image, slice).")
    image: str = Field(default="", description="Public key of the image the case refers to.")


class DeidRecord(Frozen):
    """What the de-identify step removed."""

    files: int = Field(description="Header-bearing files inspected.")
    fields_cleared: list[str] = Field(description="Header fields blanked (sorted, unique).")


class PoolManifest(Frozen):
    """``DIR/manifest.json`` of a built imaging pool."""

    task_id: str = Field(description="Task card id.")
    track: Track = Field(description="Track of the task.")
    version: int = Field(default=1, description="Pool version.")
    card_digest: str = Field(description="SHA-256 of the card the pool was built from.")
    content_hash: str = Field(description="SHA-256 over every written file (key + bytes).")
    cases: list[CaseEntry] = Field(description="Expected submission units, in order.")
    labels: list[int] = Field(default_factory=list, description="Scored labels (segmentation).")
    classes: dict[int, str] = Field(default_factory=dict, description="Class id → name.")
    public_prefix: str = Field(default="public", description="Agent-visible prefix.")
    private_prefix: str = Field(default="private", description="References prefix.")
    deid: DeidRecord = Field(description="De-identification summary.")


class FrameRow(Frozen):
    """One row of the submission manifest frame (what Great Expectations validates)."""

    case_id: str = Field(description="Case id (or the unexpected file name for extra files).")
    expected: bool = Field(description="False for files/rows the task does not ask for.")
    present: bool = Field(description="The case's output exists in the submission.")
    safe: bool = Field(default=True, description="Regular file inside the folder (no symlink).")
    readable: bool = Field(default=False, description="Parsed without error.")
    unique: bool = Field(default=True, description="Case id occurs once.")
    shape_ok: bool = Field(default=True, description="Array shape matches the input.")
    dtype_ok: bool = Field(default=True, description="Array dtype allowed.")
    values_ok: bool = Field(default=True, description="Values in the allowed set/range.")
    finite: bool = Field(default=True, description="No NaN/inf.")
    boxes_ok: bool = Field(default=True, description="Boxes ordered and inside the image.")
    answer_nonempty: bool = Field(default=True, description="Text answer is not blank.")
    reason: str = Field(default="", description="Why the row fails, for people.")

    @property
    def valid(self) -> bool:
        """Every check passed for an expected case."""
        return (self.expected and self.present and self.safe and self.readable and self.unique
                and self.shape_ok and self.dtype_ok and self.values_ok and self.finite
                and self.boxes_ok and self.answer_nonempty)


class ValidationFailure(Frozen):
    """One failed expectation and the cases it failed on."""

    expectation: str = Field(description="Expectation type.")
    column: str = Field(description="Frame column checked.")
    meaning: str = Field(description="What the expectation means, for people.")
    cases: list[str] = Field(description="Case ids (or file names) that failed.")


class ValidationReport(Frozen):
    """The Great Expectations result, condensed."""

    ok: bool = Field(description="Every expectation passed.")
    suite: str = Field(description="Suite name.")
    failures: list[ValidationFailure] = Field(description="Failed expectations.")


class CaseScore(Frozen):
    """Metric values of one case (missing/invalid cases carry the metric's missing value)."""

    case_id: str = Field(description="Case id.")
    valid: bool = Field(description="The case's output passed every frame check.")
    reason: str = Field(default="", description="Why the case was not scored normally.")
    values: dict[str, float] = Field(description="Metric name → value.")


class ScoreCard(Frozen):
    """Everything scoring produced for one submission."""

    task_id: str = Field(description="Task card id.")
    track: Track = Field(description="Track.")
    evaluator_version: str = Field(description="Evaluator version tag.")
    pool_hash: str = Field(description="content_hash of the pool scored against.")
    task_score: float = Field(description="Primary metric after policy (the headline number).")
    metrics: dict[str, float] = Field(description="Task-level metric values.")
    s4: float = Field(description="0.5·completion rate + 0.5·[all present outputs format-valid].")
    s5: float = Field(description="0.5·[positive metric evidence] + 0.5·[suite passed].")
    validation: ValidationReport = Field(description="Great Expectations outcome.")
    per_case: list[CaseScore] = Field(description="Per-case metric values.")
    notes: list[str] = Field(default_factory=list, description="Policy decisions applied.")

    def public_json(self) -> dict[str, object]:
        """The acceptance JSON shape: per_case rows are flat ``{case_id, metric: value}``."""
        data = self.model_dump(mode="json")
        data["per_case"] = [{"case_id": c.case_id, "valid": c.valid, "reason": c.reason,
                             **c.values} for c in self.per_case]
        return data
