"""Registered endpoints carry their own credential: ``medbench_endpoints.api_key_enc`` holds the
submitter's API key encrypted with the operator's Fernet key (``MEDFLOWS_ENDPOINT_CREDENTIAL_KEY``);
NULL means the endpoint is called with no credential. The operator's provider keys are never sent
to a submitter's endpoint.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("medbench_endpoints", recreate="never") as batch:
        batch.add_column(sa.Column("api_key_enc", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("medbench_endpoints", recreate="never") as batch:
        batch.drop_column("api_key_enc")
