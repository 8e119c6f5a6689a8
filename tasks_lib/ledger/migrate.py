"""Managed ledger schema: alembic revisions shipped in :mod:`tasks_lib.ledger.migrations`.

``upgrade_to_head`` brings any ledger (new, older revision, or a pre-migration ledger that was
made by ``create_all``) to the newest revision. Several processes may call it at once: on
PostgreSQL an advisory lock serialises them; on SQLite the engine's ``BEGIN IMMEDIATE`` does.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
BASELINE = "0001"
"""The revision equal to the schema ledgers had before migrations were managed."""
_PG_LOCK_KEY = 0x6D6564666C6F77  # "medflow": one advisory lock for every medflows ledger


def alembic_config(connection: Connection | None = None) -> Config:
    """An alembic config that uses the packaged scripts (and ``connection`` when given)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """Newest revision of the packaged scripts."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migration scripts in {MIGRATIONS_DIR}")
    return head


def current_revision(engine: Engine) -> str | None:
    """Revision the ledger is at (None: never migrated)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade_to_head(engine: Engine) -> None:
    """Apply every missing revision (no-op when already at head)."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
        cfg = alembic_config(conn)
        revision = MigrationContext.configure(conn).get_current_revision()
        if revision == head_revision():
            return
        if revision is None and inspect(conn).has_table("pools"):
            command.stamp(cfg, BASELINE)
        command.upgrade(cfg, "head")
