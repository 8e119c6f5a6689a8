"""A generated EHR loaded into a throw-away database on the shared 127.0.0.1:5432 server, built
once per test process and dropped at exit (for the RWE data-side tests)."""

from __future__ import annotations

import atexit
import os
from functools import lru_cache
from typing import NamedTuple

import psycopg2
import pytest

from tasks_lib.rwe import build, load
from tasks_lib.rwe.analyses import StudyDB

ADMIN = os.environ.get("MEDFLOWS_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
N_PATIENTS = 8000
"""Test size: every study's planted effect and trap flip hold at this size (seeds 0-3)."""


class LoadedDB(NamedTuple):
    """A loaded study database."""

    url: str
    db: StudyDB
    loaded: build.LoadedEHR


def require_server() -> None:
    """Skip when the shared PostgreSQL server is not reachable."""
    try:
        psycopg2.connect(**load.dsn(ADMIN)).close()
    except psycopg2.OperationalError as exc:
        pytest.skip(f"PostgreSQL at {ADMIN} not reachable: {exc}")


def fresh_database(tag: str) -> str:
    """Create an empty database for this process (dropped at exit); returns its URL."""
    name = f"medflows_rwe_{tag}_{os.getpid()}"
    load.drop_database(ADMIN, name)
    url = load.create_database(ADMIN, name).replace("postgresql://", "postgresql+psycopg2://")
    atexit.register(load.drop_database, ADMIN, name)
    return url


@lru_cache(maxsize=2)
def loaded_db(seed: int = 0, n_patients: int = N_PATIENTS) -> LoadedDB:
    """The EHR for ``seed`` loaded once per process."""
    require_server()
    url = fresh_database(f"s{seed}_n{n_patients}")
    return LoadedDB(url, StudyDB(url), build.generate_and_load(seed, n_patients, url))
