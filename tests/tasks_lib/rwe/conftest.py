"""Fixtures of the RWE run-side tests: the process's private scram-auth PostgreSQL cluster
(medflows' own, shared with the pool tests) whose admin database holds a tiny study schema and a
private schema."""

from __future__ import annotations

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
def rwe_cluster() -> Cluster:
    """medflows' own cluster of this test process (one for every RWE test: the pool tests'
    :func:`~tests.tasks_lib.rwe.pool_support.study_cluster`, stopped by PID and removed at
    exit)."""
    from tests.tasks_lib.rwe.pool_support import study_cluster

    return study_cluster()[0]


@pytest.fixture(scope="session")
def rwe_server(rwe_cluster: Cluster) -> Server:
    """Admin connection to the private cluster, with the tiny study schema loaded."""
    server = rwe_cluster.server()
    conn = connect(server)
    with conn.cursor() as cur:
        cur.execute(TINY_STUDY)
    conn.close()
    return server

