"""Boundary types of the imaging tracks: pool manifest and submission measurement rows."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, model_validator

from tasks_lib.domain import Frozen, Track
from tasks_lib.pool_format import PoolHeader


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

    files: int = Field(description="Header-bearing files inspected (NIfTI volumes, DICOM slices).")
    fields_cleared: list[str] = Field(description="Header fields blanked (sorted, unique).")
    removed: dict[str, int] = Field(
        default_factory=dict, description="Header field → number of files it was removed or "
        "blanked in (DICOM slices on the way in, NIfTI headers before publishing).")


class PoolManifest(PoolHeader):
    """``DIR/manifest.json`` of a built imaging (or challenge) pool: the shared header (the pool
    is named after its task: ``pool_id`` = ``task_id``, ``cards`` = ``[task_id]``) and the case
    body. A manifest written before the shared header (no ``pool_id``, ``cards`` or
    ``created_at``) reads as its task's pool, created at an unknown time."""

    pool_kind = "an imaging pool"

    task_id: str = Field(description="Task card id.")
    track: Track = Field(description="Track of the task.")
    version: int = Field(default=1, ge=1, description="Pool version.")
    card_digest: str = Field(description="SHA-256 of the card the pool was built from.")
    cases: list[CaseEntry] = Field(description="Expected submission units, in order.")
    labels: list[int] = Field(default_factory=list, description="Scored labels (segmentation).")
    classes: dict[int, str] = Field(default_factory=dict, description="Class id → name.")
    public_prefix: str = Field(default="public", description="Agent-visible prefix.")
    private_prefix: str = Field(default="private", description="References prefix.")
    deid: DeidRecord = Field(description="De-identification summary.")

    @model_validator(mode="before")
    @classmethod
    def _named_after_task(cls, data: Any) -> Any:
        """An older manifest (only ``task_id``) names its pool and card by the task."""
        if isinstance(data, dict) and isinstance(data.get("task_id"), str):
            data = {"pool_id": data["task_id"], "cards": [data["task_id"]], **data}
        return data


class FrameRow(Frozen):
    """One row of a submission's measurement frame: gates, measurements and the suite's verdict.

    Gates (``expected`` … ``unique``) say whether anything could be measured. Measurement columns
    are ``None`` where nothing was measured (missing or unreadable output, or a column another
    track uses); the track's Great Expectations suite holds every rule on them. Only
    :func:`tasks_lib.imaging.validation.judge_frame` sets ``judged`` and ``failed``, so a row that
    was never judged is never valid.
    """

    case_id: str = Field(description="Case id (or the unexpected file name for extra files).")
    expected: bool = Field(description="False for files/rows the task does not ask for.")
    present: bool = Field(description="The case's output exists in the submission.")
    safe: bool = Field(default=True, description="Regular file inside the folder (no symlink).")
    readable: bool = Field(default=False, description="Parsed without error.")
    unique: bool = Field(default=True, description="Case id occurs once.")
    note: str = Field(default="", description="Why a gate is closed (missing, unreadable, …).")
    ndim: int | None = Field(default=None, description="Array dimensions.")
    shape: str | None = Field(default=None, description="Array shape, e.g. '48x56x48'.")
    expected_shape: str | None = Field(default=None,
                                       description="Shape the pool manifest asks for, same form.")
    dtype: str | None = Field(default=None, description="Array dtype name, e.g. 'uint8'.")
    dtype_kind: str | None = Field(default=None, description="NumPy dtype kind: i, u, f, b, c, …")
    finite_fraction: float | None = Field(default=None,
                                          description="Share of finite values (1 for integers).")
    min_value: float | None = Field(default=None, description="Smallest finite value.")
    max_value: float | None = Field(default=None, description="Largest finite value.")
    labels: str | None = Field(default=None, description="Distinct label values, sorted, comma-"
                               "separated (voxel values or box labels; first 32, then '…').")
    n_labels: int | None = Field(default=None, description="Number of distinct label values.")
    n_unexpected_labels: int | None = Field(
        default=None, description="Distinct labels outside {0} ∪ manifest labels (segmentation) "
                                  "or the manifest's class ids (detection).")
    n_boxes: int | None = Field(default=None, description="Entries of the boxes list.")
    n_scores: int | None = Field(default=None, description="Entries of the scores list.")
    n_box_labels: int | None = Field(default=None, description="Entries of the labels list.")
    n_malformed_boxes: int | None = Field(default=None,
                                          description="Boxes that are not 4 finite numbers.")
    n_inverted_boxes: int | None = Field(default=None,
                                         description="Well-formed boxes with x2 ≤ x1 or y2 ≤ y1.")
    box_x_min: float | None = Field(default=None, description="Smallest x over well-formed boxes.")
    box_y_min: float | None = Field(default=None, description="Smallest y over well-formed boxes.")
    box_x_max: float | None = Field(default=None, description="Largest x over well-formed boxes.")
    box_y_max: float | None = Field(default=None, description="Largest y over well-formed boxes.")
    image_width: int | None = Field(default=None, description="Image width from the manifest.")
    image_height: int | None = Field(default=None, description="Image height from the manifest.")
    n_nonfinite_scores: int | None = Field(default=None,
                                           description="Scores that are not finite numbers.")
    text_length: int | None = Field(default=None,
                                    description="Characters of the answer/report, stripped.")
    judged: bool = Field(default=False, description="The track's suite has judged this row.")
    failed: list[str] = Field(default_factory=list,
                              description="One reason per suite rule the row failed.")

    @property
    def valid(self) -> bool:
        """Every gate is open, the suite judged the row and no rule failed on it."""
        return (self.expected and self.present and self.safe and self.readable and self.unique
                and self.judged and not self.failed)

    @property
    def reason(self) -> str:
        """Why the row is not valid, for people ('' if it is)."""
        return "; ".join(r for r in [self.note, *self.failed] if r)
