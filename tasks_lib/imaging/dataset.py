"""The card of a user's image folder: ``DIR/dataset.yaml`` → a :class:`TaskSpec` whose source is
an :class:`~tasks_lib.sources.ImageFolderSource`, stored under ``cards/<task_id>/task.json`` in the
storage root once its pool is published, so execute, score and audit find it like a shipped card.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import yaml
from pydantic import Field, ValidationError, field_validator

from evaluators.core import Frozen, InputDataError, Track
from tasks_lib.imaging.readers import read_bytes
from tasks_lib.sources import PublicReleaseSource
from tasks_lib.storage import Storage
from tasks_lib.taskspec import TaskSpec
from tasks_lib.tracks.base import KITS

if TYPE_CHECKING:
    from tasks_lib.imaging.render import Rendered

CONFIG = "dataset.yaml"


class FolderLayout(NamedTuple):
    """What an imaging track reads from a user's folder; set on its kit (``ImagingKit.folder``,
    None for tracks that are generated only, such as enhancement).

    Attributes:
        read: the folder reader (``DIR`` and its ``dataset.yaml`` → the pool's files).
        inputs: the card's input contract (what ``public/`` holds per case).
        outputs: the card's output contract (what a submission holds).
        metrics: the card's metrics when ``dataset.yaml`` names none.
        label_maps: the scored names are ``dataset.yaml``'s label-map ``labels`` (else its
            ``classes``).
    """

    read: Callable[[Path, DatasetConfig], Rendered]
    inputs: str
    outputs: str
    metrics: tuple[str, ...]
    label_maps: bool = False


LISTING_ORDER = ("segmentation", "detection", "vqa", "report_generation")
"""How messages list the folder tracks: the order of the folder convention in docs/imaging.md
(other tracks with a folder layout follow, by name)."""


def folder_tracks() -> list[Track]:
    """Tracks whose kit reads a user's folder, in :data:`LISTING_ORDER`."""
    from tasks_lib.imaging.registry import imaging_kit, imaging_tracks

    names = [t for t in imaging_tracks() if imaging_kit(t).folder is not None]
    rank = {name: i for i, name in enumerate(LISTING_ORDER)}
    return [Track(t) for t in sorted(names, key=lambda t: (rank.get(t, len(rank)), t))]


def folder_layout(track: Track) -> FolderLayout:
    """The folder layout of ``track``'s kit; an :class:`InputDataError` naming ``--track`` for a
    track that is not ingested from a folder."""
    from tasks_lib.imaging.registry import imaging_kit

    layout = imaging_kit(track).folder
    if layout is None:
        raise InputDataError("--track", f"{track.value} cannot be ingested from a folder; tracks: "
                                        f"{', '.join(t.value for t in folder_tracks())}")
    return layout


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


def release_card(task_id: str, layout: str | None = None) -> TaskSpec | None:
    """The shipped card ``task_id`` if it is built from a public release the user brings (its
    layout must be ``layout`` when one is given), else None."""
    from tasks_lib.imaging.pool import load_task

    shipped = [name for name in KITS.names() if task_id in KITS.get(name).task_ids()]
    card = load_task(task_id) if shipped else None
    if card is None or not isinstance(card.source, PublicReleaseSource):
        return None
    if layout not in (None, card.source.layout):
        raise InputDataError("--layout", f"{task_id} reads {card.source.release} in the "
                                         f"{card.source.layout} layout, not {layout}")
    return card


def require_generated(card: TaskSpec) -> None:
    """Refuse to build a public-release card without the user's download (naming ``--from``)."""
    src = card.source
    if isinstance(src, PublicReleaseSource):
        raise InputDataError("--from", f"{card.task_id} is built from your own download of "
                                       f"{src.release} ({src.url}; {src.access}): medflows pool "
                                       f"build imaging --task {card.task_id} --from DIR")


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
