"""Fixtures of the RWE run-side tests: a private scram-auth PostgreSQL cluster (medflows' own,
started and stopped by the test session) holding a tiny study schema and a private schema."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks_lib.rwe.cluster import Cluster, Server, connect

TINY_STUDY = """
CREATE SCHEMA IF NOT EXISTS mimiciv_hosp;
CREATE SCHEMA IF NOT EXISTS mimiciv_icu;
CREATE SCHEMA IF NOT EXISTS mimiciv_derived;
CREATE SCHEMA IF NOT EXISTS medflows_private;
CREATE TABLE IF NOT EXISTS mimiciv_hosp.patients (subject_id int PRIMARY KEY, gender text,
                                                  anchor_age int);
INSERT INTO mimiciv_hosp.patients VALUES (10000001, 'F', 70), (10000002, 'M', 55),
                                         (10000003, 'F', 17) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS medflows_private.gold (field text, value float);
INSERT INTO medflows_private.gold VALUES ('secret', 0.5);
"""


@pytest.fixture(scope="session")
def rwe_cluster() -> Iterator[Cluster]:
    """medflows' own cluster in a fresh folder (the postgres OS user must traverse it)."""
    folder = Path(tempfile.mkdtemp(prefix="medflows-rwe-test-"))
    os.chmod(folder, 0o755)
    cluster = Cluster(folder / "state", 55400 + os.getpid() % 500)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.destroy()
        assert cluster.pid() is None
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def rwe_server(rwe_cluster: Cluster) -> Server:
    """Admin connection to the private cluster, with the tiny study schema loaded."""
    server = rwe_cluster.server()
    conn = connect(server)
    with conn.cursor() as cur:
        cur.execute(TINY_STUDY)
    conn.close()
    return server

