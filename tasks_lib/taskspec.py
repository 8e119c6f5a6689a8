"""Task cards: ``datasets/<track>/<task_id>/task.yaml``, one schema for every track (data only).

A card names its data source, IO contract, metrics (references into the metric registry, which
states each metric's direction and edge conventions once), tiers and time budget. QA datasets,
generated imaging tasks and ReX-MLE challenges are all ``TaskSpec``s; what a track *does* with a
card lives in its kit (``tasks_lib/tracks/``).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from evaluators.core import Frozen, InputDataError, Tier, Track, UnknownNameError
from evaluators.metrics import METRICS, Direction, MetricSpec
from tasks_lib.settings import get_settings
from tasks_lib.sources import ChallengeSource, ScoringPolicy, Source


class GradingScope(StrEnum):
    """Whether a metric is computed per case and aggregated, or once over all cases."""

    PER_CASE = "per_case"
    WHOLE_SET = "whole_set"


class Aggregate(StrEnum):
    """How per-case values become the task value."""

    MEAN = "mean"
    MEDIAN = "median"


GradingParam = (bool | int | float | str | list[int] | list[float] | list[str]
                | dict[str, str] | dict[str, list[int]])
"""A value of :attr:`Grading.params` (plain data, as written in the card's YAML)."""


class Grading(Frozen):
    """How a leaderboard column is computed from a challenge submission by a registered metric."""

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
    params: dict[str, GradingParam] = Field(
        default_factory=dict,
        description="Keyword arguments of the metric that are conventions of this challenge "
        "(tolerances, label sets, bounds, class names), passed as fn(..., **params).",
    )


class MetricRef(Frozen):
    """One metric a card asks for; every listed metric lands on the score card.

    In YAML a bare name (``dice_macro``) is shorthand for ``{name: dice_macro}``.
    """

    name: str = Field(description="Score-card key: a registered metric name, or (challenge "
                                  "cards) the human leaderboard's column name.")
    primary: bool = Field(default=False, description="The headline metric (default: the first).")
    grading: Grading | None = Field(
        default=None, description="Challenge cards: how the column is graded (null = rank-only).")
    direction: Direction | None = Field(
        default=None, description="Only for a rank-only leaderboard column (no registered metric "
        "computes it); otherwise the metric registry states the direction, once.")

    @property
    def evaluator(self) -> str | None:
        """Registered metric computing this value (None: rank-only column)."""
        if self.grading is not None:
            return self.grading.evaluator
        return None if self.direction is not None else self.name

    @property
    def spec(self) -> MetricSpec | None:
        """The registry entry of :attr:`evaluator`."""
        return METRICS.get(self.evaluator) if self.evaluator else None

    @property
    def resolved_direction(self) -> Direction:
        """Whether higher or lower is better (from the registry where a metric computes it)."""
        spec = self.spec
        if spec is not None:
            return spec.direction
        assert self.direction is not None  # guaranteed by the validator
        return self.direction


class IOContract(Frozen):
    """What the agent receives and must hand back (prose shown in briefs and docs)."""

    inputs: str = Field(description="What the public view contains.")
    outputs: str = Field(description="The submission layout the evaluator expects.")


class Budget(Frozen):
    """Compute caps of a research cell: a tier's on its card (``budgets``), or a run's own
    (``medflows run cell --max-cost-usd/--max-steps/--wall-time-s``). None: the next source's
    (run → agent config → card tier → card default)."""

    wall_time_s: int | None = Field(default=None, gt=0, le=7 * 86400, description="Wall-clock "
                                    "cap of the run in seconds (ReX-MLE: 86400).")
    max_steps: int | None = Field(default=None, gt=0, description="Model turns (tool loop) or "
                                  "the scaffold's own steps (external agents).")
    max_cost_usd: float | None = Field(default=None, gt=0, description="Model spend of the run "
                                       "(price snapshot); reached: the run ends partial.")

    def over(self, other: Budget | None) -> Budget:
        """This budget's caps, ``other``'s where this one has none."""
        if other is None:
            return self
        return Budget(**{k: v if v is not None else getattr(other, k)
                         for k, v in self.model_dump().items()})


class TaskSpec(Frozen):
    """One benchmark task card (every track)."""

    task_id: str = Field(description="Unique id within the track; the card folder's name.")
    track: Track = Field(description="Track whose kit builds and scores this task.")
    title: str = Field(description="Human-readable title.")
    description: str = Field(description="What the task is and where its data comes from.")
    license: str = Field(description="Licence of the underlying data.")
    source: Source = Field(description="Where the task's data comes from (``kind`` selects).")
    io: IOContract = Field(description="Input/output contract.")
    metrics: list[MetricRef] = Field(min_length=1, description="Metrics computed and reported.")
    tiers: list[Tier] = Field(default_factory=lambda: [Tier.STANDARD], description="Tiers.")
    time_budget_s: int = Field(default=3600, gt=0, description="Wall-time budget per run.")
    budgets: dict[Tier, Budget] = Field(default_factory=dict, description="Per tier, caps that "
                                        "replace the defaults (time_budget_s, 30 turns, no cost "
                                        "cap) for that tier's research cells.")
    policy: ScoringPolicy = Field(default_factory=ScoringPolicy,
                                  description="Scoring policy flags (imaging tracks).")
    network: Literal["none", "host"] = Field(
        default="none", description="Network of the agent's sandbox: none (default) or host for "
        "tasks that need downloads. The evaluator never has a network.")
    notes: list[str] = Field(default_factory=list, description="Caveats on data and grading.")

    @model_validator(mode="before")
    @classmethod
    def _metric_shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("metrics"), list):
            data = {**data, "metrics": [{"name": m} if isinstance(m, str) else m
                                        for m in data["metrics"]]}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate metric names in {names}")
        if sum(m.primary for m in self.metrics) > 1:
            raise ValueError("at most one metric may be primary")
        for m in self.metrics:
            _check_metric(m, self.source)
        return self

    @property
    def primary(self) -> MetricRef:
        """The headline metric: the one marked ``primary``, else the first."""
        return next((m for m in self.metrics if m.primary), self.metrics[0])

    @property
    def primary_metric(self) -> str:
        """Name of the headline metric."""
        return self.primary.name

    @property
    def metric_names(self) -> list[str]:
        """Metric names in card order."""
        return [m.name for m in self.metrics]

    def metric(self, name: str) -> MetricRef:
        """The card's reference called ``name``."""
        for m in self.metrics:
            if m.name == name:
                return m
        raise UnknownNameError(f"metric of {self.task_id}", name, self.metric_names)

    @property
    def gradable(self) -> bool:
        """Every listed metric is computed by a registered metric."""
        return all(m.evaluator is not None for m in self.metrics)


def _check_metric(m: MetricRef, source: object) -> None:
    if m.grading is not None and m.grading.evaluator not in METRICS:
        raise ValueError(f"{m.name}: grading evaluator {m.grading.evaluator!r} is not a "
                         f"registered metric; known: {', '.join(METRICS.names())}")
    if m.grading is not None and m.direction is not None:
        raise ValueError(f"{m.name}: direction comes from the metric registry; remove it")
    if m.evaluator is not None and m.evaluator not in METRICS:
        raise ValueError(f"{m.name}: not a registered metric (known: "
                         f"{', '.join(METRICS.names())}); a rank-only leaderboard column "
                         "states its direction instead")
    if m.grading is not None and m.grading.columns:
        layout = source.submission if isinstance(source, ChallengeSource) else None
        extra = set(m.grading.columns) - set(layout.value_columns if layout else [])
        if extra:
            raise ValueError(f"{m.name}: columns {sorted(extra)} are not value_columns")


def cards_dir(track: Track, root: Path | None = None) -> Path:
    """Folder holding the cards of ``track``: ``root`` when its kit keeps them elsewhere (a
    kit's ``cards_root``), else ``datasets/<track>/``."""
    return root if root is not None else get_settings().datasets_dir / track.value


def list_cards(track: Track, root: Path | None = None) -> list[str]:
    """Task ids of the cards shipped for ``track`` (under ``root``, see :func:`cards_dir`),
    sorted."""
    folder = cards_dir(track, root)
    if not folder.is_dir():
        return []
    return sorted(p.parent.name for p in folder.glob("*/task.yaml"))


def all_card_files() -> list[Path]:
    """Every shipped card file (``datasets/*/*/task.yaml``, the template folder excluded)."""
    root = get_settings().datasets_dir
    return sorted(p for p in root.glob("*/*/task.yaml") if not p.parts[-3].startswith("_"))


def load_card(track: Track, task_id: str, root: Path | None = None) -> TaskSpec:
    """Load and schema-check one card (under ``root``, see :func:`cards_dir`); an unknown id
    fails with the known ids."""
    path = cards_dir(track, root) / task_id / "task.yaml"
    if not path.is_file():
        raise UnknownNameError(f"{track.value} task card", task_id, list_cards(track, root))
    card = load_card_file(path)
    if card.task_id != task_id or card.track is not track:
        raise InputDataError(str(path), f"task_id/track {card.task_id!r}/{card.track.value!r} "
                                        "differ from the folder")
    return card


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
