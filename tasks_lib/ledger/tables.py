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
    invalid_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    card_url: str | None = None
    created_at: datetime = Field(default_factory=_now)


class SubmitterRow(SQLModel, table=True):
    """A MedBench submitter: an account with an API key (stored hashed) and its rate limits."""

    __tablename__ = "medbench_submitters"

    name: str = Field(primary_key=True)
    key_id: str | None = Field(default=None, unique=True,
                               description="Public half of the API key (None: no key yet).")
    key_salt: str | None = Field(default=None, description="Hex salt of the key hash.")
    key_hash: str | None = Field(default=None, description="Hex scrypt hash of the secret.")
    admin: bool = False
    uploads_per_day: int
    items_per_minute: int
    created_at: datetime = Field(default_factory=_now)


class EndpointRow(SQLModel, table=True):
    """A model endpoint registered for API mode (called by the execute flow)."""

    __tablename__ = "medbench_endpoints"
    __table_args__ = (UniqueConstraint("submitter", "model_name", "model_version"),)

    id: int | None = Field(default=None, primary_key=True)
    submitter: str = Field(index=True, foreign_key="medbench_submitters.name")
    model_name: str
    model_version: str
    model: str = Field(description="litellm model string.")
    api_base: str | None = None
    api_key_enc: str | None = Field(
        default=None, description="The endpoint's own API key, Fernet-encrypted with the "
        "endpoint_credential_key setting (None: the endpoint gets no credential).")
    created_at: datetime = Field(default_factory=_now)


class SplitRow(SQLModel, table=True):
    """A downloaded randomized split: which subset version, for whom, and its private mapping."""

    __tablename__ = "medbench_splits"

    split_id: str = Field(primary_key=True)
    submitter: str | None = Field(default=None, index=True)
    pool_id: str
    pool_version: int
    pool_hash: str
    pool_url: str
    seed: int
    n_items: int
    mapping_json: str = Field(sa_column=Column(Text, nullable=False),
                              description="Split item id → item id and option order (private).")
    created_at: datetime = Field(default_factory=_now)
    expires_at: float = Field(description="Unix time after which uploads are refused.")


class SubmissionRow(SQLModel, table=True):
    """One version-locked submission; append-only (a new upload for a lock is a new version)."""

    __tablename__ = "medbench_submissions"
    __table_args__ = (UniqueConstraint("submitter", "model_name", "model_version", "pool_id",
                                       "pool_version", "evaluator_version", "version"),)

    id: int | None = Field(default=None, primary_key=True)
    submitter: str = Field(index=True, foreign_key="medbench_submitters.name")
    model_name: str
    model_version: str
    pool_id: str
    pool_version: int
    pool_hash: str
    evaluator_version: str
    version: int
    mode: str
    split_id: str | None = None
    run_id: str = Field(unique=True)
    n_predictions: int
    body_sha256: str | None = Field(
        default=None, index=True, description="SHA-256 of the uploaded bytes (None: API mode); "
        "a re-upload of the same bytes for the same lock is this version.")
    created_at: datetime = Field(default_factory=_now)


class RateEventRow(SQLModel, table=True):
    """What a submitter used (uploads, items) or was refused, for the rolling rate limits."""

    __tablename__ = "medbench_rate_events"

    id: int | None = Field(default=None, primary_key=True)
    submitter: str = Field(index=True)
    kind: str = Field(description="'upload' or 'items'.")
    n: int
    refused: bool = False
    at: float = Field(index=True, description="Unix time (seconds) of the event.")
