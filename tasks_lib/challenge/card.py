"""Challenge cards: ``datasets/challenge/<id>/task.yaml``, data only, schema-checked on load.

A card names the human leaderboard (relative to the data root), the ranked metrics with their
directions, how each metric is graded from a submission folder, and the submission layout.
"""

from __future__ import annotations

from enum import StrEnum

import yaml
from pydantic import Field, ValidationError, model_validator

from evaluators.metrics import Direction
from evaluators.registry import UnknownNameError
from tasks_lib.domain import Frozen, Tier, Track
from tasks_lib.errors import InputDataError
from tasks_lib.taskspec import cards_dir, list_cards


class ChallengeType(StrEnum):
    """What a challenge asks for (``competition_type`` of ``challenges.json``)."""

    SEGMENTATION = "segmentation"
    DETECTION = "detection"
    CLASSIFICATION = "classification"
    IMAGE_QUALITY_ASSESSMENT = "image_quality_assessment"
    IMAGE_ENHANCEMENT = "image_enhancement"


class GradingScope(StrEnum):
    """Whether a metric is computed per case and aggregated, or once over all cases."""

    PER_CASE = "per_case"
    WHOLE_SET = "whole_set"


class Aggregate(StrEnum):
    """How per-case values become the challenge value."""

    MEAN = "mean"
    MEDIAN = "median"


class FileFormat(StrEnum):
    """Formats of prediction/reference files named in ``submission.csv``."""

    NPY = "npy"
    PNG = "png"
    TIFF = "tiff"
    NIFTI = "nifti"


class Grading(Frozen):
    """How one leaderboard metric is computed from a submission with registered metrics."""

    evaluator: str = Field(description="Registered metric name (evaluators.metrics.METRICS).")
    scope: GradingScope = Field(description="Per case then aggregated, or once over the set.")
    aggregate: Aggregate = Field(default=Aggregate.MEAN, description="Per-case aggregation.")
    columns: list[str] | None = Field(
        default=None,
        description="Whole-set value metrics: the value columns it receives (default: the "
        "first); several columns arrive as a cases × columns array.",
    )
    spacing: bool = Field(
        default=False,
        description="Call the metric as fn(prediction, reference, spacing) with the reference's "
        "voxel spacing in mm (NIfTI header; 1.0 per axis for other formats).",
    )


class ChallengeMetric(Frozen):
    """One ranked metric: a column of the leaderboard."""

    name: str = Field(description="Leaderboard column name (what `challenge rank` expects).")
    direction: Direction = Field(description="higher or lower is better (metric_config.json).")
    grading: Grading | None = Field(
        default=None, description="How to compute it from a submission; null = not gradable yet."
    )


class SubmissionLayout(Frozen):
    """What a submission folder holds: ``submission.csv`` plus the files it names."""

    id_column: str = Field(default="case_id", description="Column identifying the case.")
    value_columns: list[str] = Field(
        default_factory=list, description="Columns holding predicted values (CSV-only parts)."
    )
    file_column: str | None = Field(
        default=None, description="Column naming a prediction file, relative to the folder."
    )
    file_format: FileFormat | None = Field(default=None, description="Format of those files.")
    allowed_values: list[float] | None = Field(
        default=None, description="If set, every value column must hold one of these values."
    )
    description: str = Field(description="The layout in prose, shown in briefs.")

    @model_validator(mode="after")
    def _file_column_needs_format(self) -> SubmissionLayout:
        if (self.file_column is None) != (self.file_format is None):
            raise ValueError("file_column and file_format go together")
        if self.file_column is None and not self.value_columns:
            raise ValueError("a submission needs value_columns or a file_column")
        return self


class ChallengeCard(Frozen):
    """One challenge package card."""

    task_id: str = Field(description="Challenge id; the card folder's name.")
    track: Track = Field(description="Always 'challenge'.")
    title: str = Field(description="Official challenge name.")
    description: str = Field(description="What the challenge asks and where the data comes from.")
    url: str = Field(description="Challenge web page.")
    year: int = Field(description="Edition year.")
    modality: str = Field(description="Imaging modality.")
    task_type: ChallengeType = Field(description="Kind of competition.")
    license: str = Field(description="Licence of the challenge data.")
    leaderboard: str = Field(description="Leaderboard CSV, relative to the data root.")
    metrics: list[ChallengeMetric] = Field(min_length=1, description="Ranked metrics, in order.")
    primary_metric: str = Field(description="The headline metric (one of `metrics`).")
    submission: SubmissionLayout = Field(description="Submission folder layout.")
    notes: list[str] = Field(default_factory=list, description="Caveats on data and grading.")
    tiers: list[Tier] = Field(default_factory=lambda: [Tier.STANDARD], description="Tiers.")
    time_budget_s: int = Field(default=86400, gt=0, description="Wall-time budget per run.")

    @model_validator(mode="after")
    def _consistent(self) -> ChallengeCard:
        if self.track is not Track.CHALLENGE:
            raise ValueError("track must be 'challenge'")
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate metric names in {names}")
        if self.primary_metric not in names:
            raise ValueError(f"primary_metric {self.primary_metric!r} is not one of {names}")
        for m in self.metrics:
            extra = set(m.grading.columns or []) - set(self.submission.value_columns) \
                if m.grading else set()
            if extra:
                raise ValueError(f"{m.name}: columns {sorted(extra)} are not value_columns")
        return self

    @property
    def metric_names(self) -> list[str]:
        """Ranked metric names in card order."""
        return [m.name for m in self.metrics]

    @property
    def gradable(self) -> bool:
        """Every ranked metric can be computed from a submission folder."""
        return all(m.grading is not None for m in self.metrics)


def list_challenges() -> list[str]:
    """Ids of the shipped challenge cards, sorted."""
    return list_cards(Track.CHALLENGE)


def load_challenge(challenge_id: str) -> ChallengeCard:
    """Load and schema-check one card; an unknown id fails with the known ids."""
    path = cards_dir(Track.CHALLENGE) / challenge_id / "task.yaml"
    if not path.is_file():
        raise UnknownNameError("challenge", challenge_id, list_challenges())
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        card = ChallengeCard.model_validate(raw)
    except yaml.YAMLError as exc:
        raise InputDataError(str(path), f"invalid YAML: {exc}") from None
    except ValidationError as exc:
        raise InputDataError(str(path), f"card does not match the schema:\n{exc}") from None
    if card.task_id != challenge_id:
        raise InputDataError(str(path), f"task_id {card.task_id!r} differs from the folder name")
    return card
