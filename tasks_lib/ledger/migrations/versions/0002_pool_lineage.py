"""Pool lineage: a pool row is a constructed pool or a rotation subset of parent pools.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pools") as batch:
        batch.add_column(sa.Column("kind", sa.String(), nullable=False, server_default="pool"))
        batch.add_column(sa.Column("parents_json", sa.Text(), nullable=False,
                                   server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("pools") as batch:
        batch.drop_column("parents_json")
        batch.drop_column("kind")
