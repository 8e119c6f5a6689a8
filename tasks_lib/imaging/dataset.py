"""The card of a user's image folder: ``DIR/dataset.yaml`` → a :class:`TaskSpec` whose source is
an :class:`~tasks_lib.sources.ImageFolderSource`, stored under ``cards/<task_id>/task.json`` in the
storage root once its pool is published, so execute, score and audit find it like a shipped card.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator

from evaluators.core import Frozen, InputDataError, Tier, Track, UnknownNameError
from tasks_lib.imaging.readers import read_bytes
from tasks_lib.sources import ImageFolderSource
from tasks_lib.storage import Storage
from tasks_lib.taskspec import IOContract, TaskSpec, find_card

CONFIG = "dataset.yaml"
FOLDER_TRACKS = (Track.SEGMENTATION, Track.DETECTION, Track.VQA, Track.REPORT_GENERATION)
"""Tracks a folder can be ingested into (enhancement pairs are generated only)."""
DEFAULT_METRICS = {
    Track.SEGMENTATION: ["dice_macro", "hd95"],
    Track.DETECTION: ["map_50", "map_50_coco"],
    Track.VQA: ["vqa_exact_match"],
    Track.REPORT_GENERATION: ["report_score", "bleu", "meteor", "rouge_l", "finding_f1"],
}
IO = {
    Track.SEGMENTATION: (
        "public/inputs/<case_id>.nii.gz — the image volume (2D images as one-slice volumes); "
        "its affine gives the voxel spacing in mm",
        "<case_id>.nii.gz per case: integer label map on the input's grid (same shape), values "
        "0 (background) or one of the declared labels. No other files."),
    Track.DETECTION: (
        "public/images/<case_id>.png — 8-bit greyscale image",
        '<case_id>.json per image: {"boxes": [[x1, y1, x2, y2], ...], "scores": [...], '
        '"labels": [...]} in pixel coordinates (x = column, edges exclusive), one finite score '
        "and one declared class id per box. No other files."),
    Track.VQA: ("public/images/<case_id>.png and public/questions.csv (question_id, case_id, "
                "question)", "answers.csv with columns question_id, answer; one row per "
                "question. No other files."),
    Track.REPORT_GENERATION: ("public/images/<case_id>.png — 8-bit greyscale image",
                             "reports.csv with columns case_id, report; one row per image. No "
                             "other files."),
}


class DatasetConfig(Frozen):
    """``DIR/dataset.yaml`` (every field optional)."""

    title: str | None = Field(default=None, description="Task title (default: the folder name).")
    description: str | None = Field(default=None, description="What the data is and where it "
                                                              "comes from.")
    license: str = Field(default="unspecified (user-supplied data)",
                         description="Licence of the images and labels.")
    labels: dict[int, str] = Field(
        default_factory=lambda: {1: "foreground"},
        description="Segmentation: label value → name; every value of a label map must be 0 or "
                    "one of these, and these are scored.")
    classes: dict[int, str] = Field(
        default_factory=lambda: {1: "object"},
        description="Detection: class id → name; every box label must be one of these.")
    spacing: list[float] | None = Field(
        default=None, min_length=2, max_length=3,
        description="Pixel size in mm per array axis (rows, columns[, slice]) of PNG/TIFF "
                    "images, which carry none (default 1 mm); NIfTI and DICOM use their headers.")
    metrics: list[str] | None = Field(default=None, description="Metrics of the card (default: "
                                                                "the track's usual ones).")

    @field_validator("labels", "classes")
    @classmethod
    def _positive(cls, v: dict[int, str]) -> dict[int, str]:
        if not v or any(k < 1 for k in v):
            raise ValueError("needs at least one id, each ≥ 1 (0 is background)")
        return v

    @field_validator("spacing")
    @classmethod
    def _spacing(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and any(not (s > 0) for s in v):
            raise ValueError("spacing values must be positive millimetres")
        return v


def read_config(root: Path) -> DatasetConfig:
    """``DIR/dataset.yaml``, or the defaults when there is none."""
    path = root / CONFIG
    if not path.is_file():
        return DatasetConfig()
    try:
        raw = yaml.safe_load(read_bytes(path, CONFIG).decode("utf-8"))
        return DatasetConfig.model_validate(raw or {})
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputDataError(CONFIG, f"invalid YAML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputDataError(CONFIG, f"{where}: {first['msg']}") from None


def folder_digest(root: Path) -> str:
    """SHA-256 over every visible file under ``root`` (relative path + content), in path order."""
    digest = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(root).parts))
    for p in files:
        rel = p.relative_to(root).as_posix()
        h = hashlib.sha256()
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest.update(rel.encode() + b"\0" + h.digest())
    return digest.hexdigest()


def default_task_id(root: Path) -> str:
    """The folder's name as a task id (lower case; other characters become '-')."""
    return re.sub(r"[^a-z0-9]+", "-", root.name.lower()).strip("-") or "user-images"


def folder_card(root: Path, track: Track, task_id: str | None = None) -> TaskSpec:
    """The card of a user's folder (``dataset.yaml`` + the track's defaults).

    Raises:
        InputDataError: the folder is missing, ``dataset.yaml`` is invalid, the task id is
            malformed or belongs to a shipped card, or the track cannot be ingested.
    """
    if not root.is_dir():
        raise InputDataError(str(root.name or root), "not a folder")
    if track not in FOLDER_TRACKS:
        raise InputDataError("--track", f"{track.value} cannot be ingested from a folder; "
                                        f"tracks: {', '.join(t.value for t in FOLDER_TRACKS)}")
    tid = task_id or default_task_id(root)
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,63}", tid):
        raise InputDataError("--task-id", f"{tid!r}: lower-case letters, digits, '.', '_', '-'")
    try:
        shipped = find_card(tid)
    except UnknownNameError:
        shipped = None
    if shipped is not None:
        raise InputDataError("--task-id", f"{tid!r} is a shipped {shipped.track.value} task; "
                                          "choose another id")
    cfg = read_config(root)
    source = ImageFolderSource(
        kind="image_folder", folder=root.name, digest=folder_digest(root),
        labels=cfg.labels if track is Track.SEGMENTATION else {},
        classes={} if track is Track.SEGMENTATION else cfg.classes, spacing=cfg.spacing)
    inputs, outputs = IO[track]
    try:
        return TaskSpec(
            task_id=tid, track=track, title=cfg.title or f"{root.name} ({track.value})",
            description=cfg.description or f"Images and labels of the folder {root.name!r}, "
            "ingested with medflows pool build imaging --from.",
            license=cfg.license, source=source, io=IOContract(inputs=inputs, outputs=outputs),
            metrics=cfg.metrics or DEFAULT_METRICS[track],
            tiers=[Tier.LITE, Tier.STANDARD, Tier.PRO])
    except ValidationError as exc:
        raise InputDataError(CONFIG, f"metrics: {exc.errors()[0]['msg']}") from None


def card_key(task_id: str) -> str:
    """Where a user task's card is stored, relative to the storage root."""
    return f"cards/{task_id}/task.json"


def save_user_card(card: TaskSpec) -> None:
    """Store the card of an ingested folder (its pool is being published)."""
    Storage.from_settings().write_text(card_key(card.task_id), card.model_dump_json(indent=2))


def user_card(task_id: str) -> TaskSpec | None:
    """The stored card of an ingested folder, if any."""
    store = Storage.from_settings()
    if not store.exists(card_key(task_id)):
        return None
    return TaskSpec.model_validate_json(store.read_text(card_key(task_id)))
