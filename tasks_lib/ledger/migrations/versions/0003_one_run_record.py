"""One run record and one score card for every track: the run's track, model, method, answered
items and mean item time; the score's primary metric, coverage and per-stratum metrics.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("track", sa.String(), nullable=True))
        batch.add_column(sa.Column("model", sa.String(), nullable=True))
        batch.add_column(sa.Column("method", sa.String(), nullable=True))
        batch.add_column(sa.Column("n_answered", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("item_time_s", sa.Float(), nullable=True))
    with op.batch_alter_table("scores") as batch:
        batch.add_column(sa.Column("primary_metric", sa.String(), nullable=True))
        batch.add_column(sa.Column("coverage", sa.Float(), nullable=True))
        batch.add_column(sa.Column("groups_json", sa.Text(), nullable=False,
                                   server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("scores") as batch:
        batch.drop_column("groups_json")
        batch.drop_column("coverage")
        batch.drop_column("primary_metric")
    with op.batch_alter_table("runs") as batch:
        for name in ("item_time_s", "n_answered", "method", "model", "track"):
            batch.drop_column(name)
