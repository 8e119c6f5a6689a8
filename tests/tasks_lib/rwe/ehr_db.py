"""A generated EHR loaded into its own database on the test process's study cluster (medflows'
own scram-auth cluster of :mod:`tests.tasks_lib.rwe.pool_support`, removed at exit), built once
per test process and shared by the data-side and run-side RWE tests: loading the same EHR again
reuses that database (content-addressed), so the 8,000-patient EHR is generated and loaded once."""

from __future__ import annotations

import atexit
import os
from functools import lru_cache
from typing import NamedTuple

import psycopg2
import pytest
from sqlalchemy.engine import make_url

from tasks_lib.rwe import build, ehr, load
from tasks_lib.rwe.analysis_base import StudyDB

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


@lru_cache(maxsize=1)
def generated(seed: int = 0, n_patients: int = N_PATIENTS) -> tuple[ehr.EHR, dict[str, bytes]]:
    """The generated EHR of ``seed`` and its canonical table CSVs, made once per process for the
    tests that load it into databases of their own (a mimic-code database, release-layout
    files): 4-5 s of CPU each time at 8,000 patients. Read-only: callers must not modify it."""
    data = ehr.generate(seed, n_patients)
    return data, ehr.table_csvs(data)


@lru_cache(maxsize=2)
def loaded_db(seed: int = 0, n_patients: int = N_PATIENTS) -> LoadedDB:
    """The EHR for ``seed`` loaded once per process into the study cluster."""
    from tests.tasks_lib.rwe.pool_support import study_cluster

    _, server = study_cluster()
    loaded = build.generate_and_load(seed, n_patients, server.url())
    url = make_url(server.url()).set(database=loaded.database).render_as_string(
        hide_password=False)
    return LoadedDB(url, StudyDB(url), loaded)
