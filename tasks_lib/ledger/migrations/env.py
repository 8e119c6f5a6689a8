"""Alembic environment: runs on the connection handed over by :mod:`tasks_lib.ledger.migrate`."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import tasks_lib.ledger.tables  # noqa: F401  (registers the tables on the metadata)

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=SQLModel.metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
