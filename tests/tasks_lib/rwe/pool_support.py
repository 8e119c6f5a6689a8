"""A published RWE study pool on medflows' own (scram-auth) cluster for the run-side slow tests:
the cluster is started once per test process in a fresh folder and stopped (by PID) at exit;
the pool is built with the data side's construct steps (generate, load, reference answers, trap
panel, write) and ledgered like ``medflows pool build rwe`` does."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from tasks_lib.pool_publish import record_version
from tasks_lib.rwe.cluster import Cluster, Server
from tasks_lib.settings import reset_settings

N_PATIENTS = 8000
"""The data side's test size (every trap flips at 8,000 patients)."""


@lru_cache(maxsize=1)
def study_cluster() -> tuple[Cluster, Server]:
    """medflows' own cluster for this process; the settings point the run side at it."""
    folder = Path(tempfile.mkdtemp(prefix="medflows-rwe-runs-"))
    os.chmod(folder, 0o755)
    cluster = Cluster(folder / "state", 54900 + os.getpid() % 500)
    os.environ["MEDFLOWS_RWE_CLUSTER_DIR"] = str(cluster.state_dir)
    os.environ["MEDFLOWS_RWE_CLUSTER_PORT"] = str(cluster.port)
    os.environ.pop("MEDFLOWS_RWE_DB_URL", None)
    reset_settings()
    server = cluster.start()
    atexit.register(shutil.rmtree, folder, True)  # runs after destroy (atexit is LIFO)
    atexit.register(cluster.destroy)
    return cluster, server


class TestPool(NamedTuple):
    """A built pool."""

    url: str
    studies: list[str]


@lru_cache(maxsize=1)
def built_pool(seed: int = 0) -> TestPool:
    """Every shipped study, built on the process's shared EHR database in the cluster."""
    from support.audited import record_override

    from tasks_lib.rwe import build
    from tasks_lib.rwe.studies import load_studies
    from tasks_lib.rwe.types import SchemaNames
    from tests.tasks_lib.rwe.ehr_db import loaded_db

    shared = loaded_db(seed, N_PATIENTS)  # the data-side tests' EHR and database
    builds = [build.build_study(s, shared.db) for s in load_studies()]
    url, manifest = build.write_pool(f"rwe-run-tests-{os.getpid()}", None, seed, N_PATIENTS,
                                     shared.loaded, SchemaNames(), builds)
    record_override(url, "rwe")
    record_version.fn(url, manifest, len(manifest.studies))
    return TestPool(url, manifest.studies)


AUDIT_STUDIES = ("albumin-ap", "glucose-ich")
"""Two studies no constant option letter wins (the construct flow test's pair)."""


def small_pool(root: Path, pool_id: str = "rwe-audit", studies: tuple[str, ...] = AUDIT_STUDIES
               ) -> str:
    """A pool of ``studies`` written at ``root`` on the process's shared EHR database (not
    ledgered, not audited); returns its URL."""
    from tasks_lib.rwe import build
    from tasks_lib.rwe.studies import load_studies
    from tasks_lib.rwe.types import SchemaNames
    from tests.tasks_lib.rwe.ehr_db import loaded_db

    shared = loaded_db()
    builds = [build.build_study(s, shared.db) for s in load_studies(list(studies))]
    url, _ = build.write_pool(pool_id, str(root), 0, N_PATIENTS, shared.loaded, SchemaNames(),
                              builds)
    return url
