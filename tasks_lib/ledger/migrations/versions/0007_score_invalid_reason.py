"""A score row says why its run is invalid: ``scores.invalid_reason`` (the score card's reason —
isolation breach, fabricated identifiers, malformed submission; NULL for a valid run and for
rows scored before this revision). Leaderboards read it from the ledger alone, so an invalid run
is shown with its reason and never ranked.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scores", recreate="never") as batch:
        batch.add_column(sa.Column("invalid_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scores") as batch:
        batch.drop_column("invalid_reason")
