"""Ledger backends for the parametrised ledger tests: a fresh SQLite file and a fresh PostgreSQL
database per test.

PostgreSQL is found at ``MEDFLOWS_TEST_POSTGRES_URL`` (default: the local server on
127.0.0.1:5432, user ``postgres``). When no server answers the PostgreSQL cases skip with a
clear message, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

ADMIN_URL = os.environ.get("MEDFLOWS_TEST_POSTGRES_URL",
                           "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres")
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)]


def _postgres_admin():  # type: ignore[no-untyped-def]
    engine = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT",
                           connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except OperationalError as exc:
        engine.dispose()
        message = f"no PostgreSQL server answers at {make_url(ADMIN_URL)!r}: {exc.orig}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: PostgreSQL tests must run)")
        pytest.skip(message)
    return engine


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """URL of a brand-new PostgreSQL database, dropped afterwards."""
    admin = _postgres_admin()
    name = f"medflows_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        from tasks_lib.ledger.store import dispose_engines

        dispose_engines()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty ledger on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url
