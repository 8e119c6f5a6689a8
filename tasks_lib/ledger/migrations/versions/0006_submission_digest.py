"""An upload remembers the digest of its bytes: ``medbench_submissions.body_sha256`` (SHA-256 of
the uploaded file; NULL for API-mode submissions and uploads accepted before this revision). A
re-upload of the same bytes by the same submitter for the same lock finds its version by this
column instead of creating a new one; the index serves that lookup.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("medbench_submissions", recreate="never") as batch:
        batch.add_column(sa.Column("body_sha256", sa.String(), nullable=True))
    op.create_index("ix_medbench_submissions_body_sha256", "medbench_submissions",
                    ["body_sha256"])


def downgrade() -> None:
    op.drop_index("ix_medbench_submissions_body_sha256", table_name="medbench_submissions")
    with op.batch_alter_table("medbench_submissions", recreate="never") as batch:
        batch.drop_column("body_sha256")
