"""Task cards: ``datasets/<track>/<task_id>/task.yaml``, schema-checked on load (data only)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import Field, ValidationError

from evaluators.registry import UnknownNameError
from tasks_lib.domain import Frozen, Tier, Track
from tasks_lib.errors import InputDataError
from tasks_lib.imaging.sources import (
    KSpaceSuperResSource,
    LesionSliceSource,
    LowDoseCTSource,
    MNITissueSource,
    ScoringPolicy,
)
from tasks_lib.settings import get_settings


class QASource(Frozen):
    """Where a multiple-choice QA dataset's questions come from."""

    kind: Literal["qa_jsonl"] = Field(description="Source type discriminator.")
    questions: str = Field(
        description="JSONL in the shared schema: relative to the source folder (default "
        "<data root>/medagentsbench), absolute, or a URL."
    )
    train: str | None = Field(
        default=None, description="Optional train JSONL (few-shot exemplars), same conventions."
    )
    stratify_field: str = Field(
        default="meta_info", description="Item field used for stratified selection."
    )


Source = Annotated[
    QASource | MNITissueSource | LowDoseCTSource | KSpaceSuperResSource | LesionSliceSource,
    Field(discriminator="kind"),
]
"""Every kind of task source; ``kind`` selects the model."""


class IOContract(Frozen):
    """What the agent receives and must hand back (prose shown in briefs and docs)."""

    inputs: str = Field(description="What the public view contains.")
    outputs: str = Field(description="The submission layout the evaluator expects.")


class TaskSpec(Frozen):
    """One benchmark task card."""

    task_id: str = Field(description="Unique id within the track; the card folder's name.")
    track: Track = Field(description="Track whose evaluator scores this task.")
    title: str = Field(description="Human-readable title.")
    description: str = Field(description="What the task is and where its data comes from.")
    license: str = Field(description="Licence of the underlying data.")
    source: Source = Field(description="Where the task's data comes from.")
    io: IOContract = Field(description="Input/output contract.")
    metrics: list[str] = Field(description="Registered metric names; the first is primary.")
    tiers: list[Tier] = Field(default_factory=lambda: [Tier.STANDARD], description="Tiers.")
    time_budget_s: int = Field(default=3600, gt=0, description="Wall-time budget per run.")
    policy: ScoringPolicy = Field(default_factory=ScoringPolicy,
                                  description="Scoring policy flags (imaging tracks).")
    network: Literal["none", "host"] = Field(
        default="none", description="Network of the agent's sandbox: none (default) or host for "
        "tasks that need downloads. The evaluator never has a network.")


def cards_dir(track: Track) -> Path:
    """Folder holding the cards of ``track``."""
    return get_settings().datasets_dir / track.value


def list_cards(track: Track) -> list[str]:
    """Task ids of the cards shipped for ``track``, sorted."""
    root = cards_dir(track)
    if not root.is_dir():
        return []
    return sorted(p.parent.name for p in root.glob("*/task.yaml"))


def load_card(track: Track, task_id: str) -> TaskSpec:
    """Load and schema-check one card; an unknown id fails with the known ids."""
    path = cards_dir(track) / task_id / "task.yaml"
    if not path.is_file():
        raise UnknownNameError(f"{track.value} task card", task_id, list_cards(track))
    return load_card_file(path)


def load_card_file(path: Path) -> TaskSpec:
    """Load a card from any path (used for cards outside ``datasets/``)."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InputDataError(str(path), f"invalid YAML: {exc}") from None
    try:
        return TaskSpec.model_validate(raw)
    except ValidationError as exc:
        raise InputDataError(str(path), f"task card does not match the schema:\n{exc}") from None


def resolve_data_path(ref: str, base: str | None = None) -> str:
    """Turn a card's data reference into a path or URL.

    Absolute paths and URLs are used as they are; relative references resolve against ``base``
    (a source folder given on the command line) or, by default, the data root.
    """
    if "://" in ref or Path(ref).is_absolute():
        return ref
    root = base if base is not None else str(get_settings().data_root)
    return f"{root.rstrip('/')}/{ref}"
