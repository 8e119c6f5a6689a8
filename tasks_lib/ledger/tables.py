"""Ledger tables. Kept apart from domain types: these are storage rows, not boundary objects.

The schema is managed by alembic (:mod:`tasks_lib.ledger.migrate`): a change here needs a new
revision in ``migrations/versions`` (``tests/ledger`` fails until the two agree).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


def _now() -> datetime:
    return datetime.now(UTC)


class PoolRow(SQLModel, table=True):
    """A published pool version."""

    __tablename__ = "pools"

    pool_id: str = Field(primary_key=True)
    version: int = Field(primary_key=True)
    track: str
    content_hash: str = Field(index=True)
    manifest_url: str
    n_items: int
    kind: str = Field(default="pool", description="'pool' (constructed) or 'subset' (rotation).")
    parents_json: str = Field(
        default="[]", sa_column=Column(Text, nullable=False, default="[]"),
        description="JSON list of parent pools ``{pool_id, version, content_hash}`` of a subset.",
    )
    created_at: datetime = Field(default_factory=_now)


class RunRow(SQLModel, table=True):
    """One run, keyed ``(agent_id, task_id, tier, run_id)``; ``run_id`` alone is unique too."""

    __tablename__ = "runs"
    __table_args__ = (UniqueConstraint("agent_id", "task_id", "tier", "run_id"),)

    run_id: str = Field(primary_key=True)
    agent_id: str = Field(index=True)
    task_id: str = Field(index=True)
    tier: str
    replicate: int = 0
    track: str | None = None
    model: str | None = None
    method: str | None = None
    pool_id: str | None = None
    pool_version: int | None = None
    status: str
    n_items: int | None = None
    n_answered: int | None = None
    item_time_s: float | None = None
    turns: int | None = None
    wall_time_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    submission_url: str | None = None
    trace_url: str | None = None
    created_at: datetime = Field(default_factory=_now)


class ScoreRow(SQLModel, table=True):
    """A score card summary; append-only, unique per ``(run_id, evaluator_version)``."""

    __tablename__ = "scores"
    __table_args__ = (UniqueConstraint("run_id", "evaluator_version"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True, foreign_key="runs.run_id")
    evaluator_version: str
    task_score: float | None = None
    primary_metric: str | None = None
    coverage: float | None = None
    groups_json: str = Field(default="{}", sa_column=Column(Text, nullable=False, default="{}"))
    error_codes: str = Field(default="[]", sa_column=Column(Text, nullable=False, default="[]"))
    metrics_json: str = Field(default="{}", sa_column=Column(Text, nullable=False, default="{}"))
    stages_json: str = Field(default="{}", sa_column=Column(Text, nullable=False, default="{}"))
    agentic: float | None = None
    overall: float | None = None
    card_url: str | None = None
    created_at: datetime = Field(default_factory=_now)
