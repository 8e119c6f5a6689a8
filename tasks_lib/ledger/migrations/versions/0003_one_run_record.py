"""One run record and one score card for every track: the run's track, model, method, answered
items and mean item time; the score's primary metric, coverage, per-stratum metrics and error
codes (the error-code coder is part of scoring: its codes move from the run row to the score
rows, and back on downgrade).

Columns are added and dropped in place (``recreate="never"``: ALTER TABLE … DROP COLUMN, SQLite
≥ 3.35): rebuilding ``runs`` would trip the scores → runs foreign key inside the transaction.

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
    with op.batch_alter_table("scores") as batch:
        batch.add_column(sa.Column("primary_metric", sa.String(), nullable=True))
        batch.add_column(sa.Column("coverage", sa.Float(), nullable=True))
        batch.add_column(sa.Column("groups_json", sa.Text(), nullable=False,
                                   server_default="{}"))
        batch.add_column(sa.Column("error_codes", sa.Text(), nullable=False,
                                   server_default="[]"))
    op.execute("UPDATE scores SET error_codes = COALESCE((SELECT runs.error_codes FROM runs "
               "WHERE runs.run_id = scores.run_id), '[]')")
    with op.batch_alter_table("runs", recreate="never") as batch:
        batch.add_column(sa.Column("track", sa.String(), nullable=True))
        batch.add_column(sa.Column("model", sa.String(), nullable=True))
        batch.add_column(sa.Column("method", sa.String(), nullable=True))
        batch.add_column(sa.Column("n_answered", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("item_time_s", sa.Float(), nullable=True))
        batch.drop_column("error_codes")


def downgrade() -> None:
    with op.batch_alter_table("runs", recreate="never") as batch:
        batch.add_column(sa.Column("error_codes", sa.Text(), nullable=False,
                                   server_default="[]"))
        for name in ("item_time_s", "n_answered", "method", "model", "track"):
            batch.drop_column(name)
    op.execute("UPDATE runs SET error_codes = COALESCE((SELECT scores.error_codes FROM scores "
               "WHERE scores.run_id = runs.run_id ORDER BY scores.id DESC LIMIT 1), '[]')")
    with op.batch_alter_table("scores", recreate="never") as batch:
        batch.drop_column("error_codes")
        batch.drop_column("groups_json")
        batch.drop_column("coverage")
        batch.drop_column("primary_metric")
