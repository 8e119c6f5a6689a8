"""MedBench v4 submissions: submitters (API keys stored hashed, rate limits), registered model
endpoints (API mode), downloaded randomized splits, version-locked append-only submissions and
the rate-limit events.

New tables only; the existing ones are untouched.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "medbench_submitters",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("key_id", sa.String(), nullable=True),
        sa.Column("key_salt", sa.String(), nullable=True),
        sa.Column("key_hash", sa.String(), nullable=True),
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.Column("uploads_per_day", sa.Integer(), nullable=False),
        sa.Column("items_per_minute", sa.Integer(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("name"),
        sa.UniqueConstraint("key_id"),
    )
    op.create_table(
        "medbench_endpoints",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submitter", sa.String(), nullable=False),
        sa.Column("model_name", sa.String(), nullable=False),
        sa.Column("model_version", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("api_base", sa.String(), nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(["submitter"], ["medbench_submitters.name"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("submitter", "model_name", "model_version"),
    )
    op.create_index("ix_medbench_endpoints_submitter", "medbench_endpoints", ["submitter"])
    op.create_table(
        "medbench_splits",
        sa.Column("split_id", sa.String(), nullable=False),
        sa.Column("submitter", sa.String(), nullable=True),
        sa.Column("pool_id", sa.String(), nullable=False),
        sa.Column("pool_version", sa.Integer(), nullable=False),
        sa.Column("pool_hash", sa.String(), nullable=False),
        sa.Column("pool_url", sa.String(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("n_items", sa.Integer(), nullable=False),
        sa.Column("mapping_json", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("split_id"),
    )
    op.create_index("ix_medbench_splits_submitter", "medbench_splits", ["submitter"])
    op.create_table(
        "medbench_submissions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submitter", sa.String(), nullable=False),
        sa.Column("model_name", sa.String(), nullable=False),
        sa.Column("model_version", sa.String(), nullable=False),
        sa.Column("pool_id", sa.String(), nullable=False),
        sa.Column("pool_version", sa.Integer(), nullable=False),
        sa.Column("pool_hash", sa.String(), nullable=False),
        sa.Column("evaluator_version", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(), nullable=False),
        sa.Column("split_id", sa.String(), nullable=True),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("n_predictions", sa.Integer(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(["submitter"], ["medbench_submitters.name"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id"),
        sa.UniqueConstraint("submitter", "model_name", "model_version", "pool_id",
                            "pool_version", "evaluator_version", "version"),
    )
    op.create_index("ix_medbench_submissions_submitter", "medbench_submissions", ["submitter"])
    op.create_table(
        "medbench_rate_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submitter", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("refused", sa.Boolean(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_medbench_rate_events_submitter", "medbench_rate_events", ["submitter"])
    op.create_index("ix_medbench_rate_events_at", "medbench_rate_events", ["at"])


def downgrade() -> None:
    op.drop_index("ix_medbench_rate_events_at", table_name="medbench_rate_events")
    op.drop_index("ix_medbench_rate_events_submitter", table_name="medbench_rate_events")
    op.drop_table("medbench_rate_events")
    op.drop_index("ix_medbench_submissions_submitter", table_name="medbench_submissions")
    op.drop_table("medbench_submissions")
    op.drop_index("ix_medbench_splits_submitter", table_name="medbench_splits")
    op.drop_table("medbench_splits")
    op.drop_index("ix_medbench_endpoints_submitter", table_name="medbench_endpoints")
    op.drop_table("medbench_endpoints")
    op.drop_table("medbench_submitters")
