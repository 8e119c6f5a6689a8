"""Prefect steps of the RWE construct flow (``flows/rwe.py``): load cards, generate and load
the EHR, analyse each study, validate the trap and variant panels, write the pool version (the
flow ends with the shared tail, :func:`tasks_lib.pool_publish.publish_version`: the one exploit
audit, then the ledger)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prefect import get_run_logger, task
from pydantic import Field
from sqlalchemy.engine import make_url

from evaluators.core import Frozen, InputDataError
from tasks_lib.rwe import build
from tasks_lib.rwe.analysis_base import StudyDB
from tasks_lib.rwe.studies import load_studies
from tasks_lib.rwe.types import RWEPoolManifest, SchemaNames, Study

if TYPE_CHECKING:
    from tasks_lib.tracks.base import BuildRequest


class PublishedRWEPool(Frozen):
    """A written RWE pool version and what building it cost."""

    url: str
    manifest: RWEPoolManifest
    generate_s: float
    load_s: float
    analyse_s: float
    database_reused: bool = Field(default=False, description="The EHR's database already "
                                  "existed on the study server (nothing was loaded).")


def resolve_database(database_url: str | None) -> str:
    """Admin URL of the server the EHR is loaded into: the argument, else the study server the
    agents use (``MEDFLOWS_RWE_DB_URL``, else medflows' own cluster, started on demand; never
    the shared trust-auth server)."""
    if not database_url:
        from tasks_lib.rwe.cluster import study_database_url

        return study_database_url()
    if make_url(database_url).get_backend_name() != "postgresql":
        raise InputDataError("--database-url", "the study database must be PostgreSQL")
    return database_url


@task(name="rwe-load-cards")
def load_cards(study_ids: list[str] | None) -> list[Study]:
    """Load and check the study cards."""
    return load_studies(study_ids)


def database_url(name: str) -> str:
    """SQLAlchemy URL of database ``name`` on the study server. Steps take database *names* and
    resolve the server here, so no credential is a step parameter or result (Prefect shows and
    persists those)."""
    server = resolve_database(None)
    return make_url(server).set(database=name).render_as_string(hide_password=False)


@task(name="rwe-generate-load", task_run_name="rwe-generate-load-seed{seed}-n{n_patients}")
def generate_load(seed: int, n_patients: int) -> build.LoadedEHR:
    """Generate the synthetic EHR and COPY it into its own database on the study server (reused
    when that database already holds it)."""
    loaded = build.generate_and_load(seed, n_patients, resolve_database(None))
    get_run_logger().info("EHR %s in database %s: generated in %.1f s, %s in %.1f s (%d lab rows)",
                          loaded.content_hash[:12], loaded.database, loaded.generate_s,
                          "reused" if loaded.reused else "loaded", loaded.load_s,
                          loaded.rows.get("mimiciv_hosp.labevents", 0))
    return loaded


@task(name="rwe-analyse", task_run_name="rwe-analyse-{study.study_id}")
def analyse_study(study: Study, database: str) -> build.StudyBuild:
    """Reference analysis, answers and trap panel of one study (on the EHR's ``database``)."""
    return build.build_study(study, StudyDB(database_url(database)))


@task(name="rwe-publish")
def publish(pool_id: str, out: str | None, seed: int, n_patients: int,
            loaded: build.LoadedEHR, builds: list[build.StudyBuild],
            timings: tuple[float, float, float]) -> PublishedRWEPool:
    """Write the pool version (version from the ledger: same content ⇒ same version; the shared
    tail, :func:`tasks_lib.pool_publish.publish_version`, audits and ledgers it)."""
    url, manifest = build.write_pool(pool_id, out, seed, n_patients, loaded, SchemaNames(),
                                     builds)
    return PublishedRWEPool(url=url, manifest=manifest, generate_s=timings[0],
                            load_s=timings[1], analyse_s=timings[2],
                            database_reused=loaded.reused)


@task(name="rwe-validate")
def validate(builds: list[build.StudyBuild]) -> None:
    """The pool's construction validity, before it is written: every study has a trap panel
    and each trap flips a scored field (else the pool cannot tell a careless analysis from the
    protocol's); other valid analyses (variants) that flip a scored field are warned about.

    Raises:
        InputDataError: a study without traps or with a trap that flips nothing (names each).
    """
    bad = [f"{b.study.study_id}: no trap analysis" for b in builds if not b.traps]
    bad += [f"{t.study_id}: trap {t.trap} flips nothing" for b in builds for t in b.traps
            if not t.flipped]
    if bad:
        raise InputDataError("trap panel", "; ".join(bad) + " (rule: every study has a trap "
                             "panel and each trap flips a scored field; build with more "
                             "patients or fix the study card)")
    variants = [v for b in builds for v in b.variants]
    flipped = [f"{v.study_id}: variant {v.variant} flips {', '.join(v.flipped)}"
               for v in variants if v.flipped]
    if flipped or not variants:
        get_run_logger().warning("variant panel: %s (rule: other valid analyses agree with the "
                                 "gold on every scored field)",
                                 "; ".join(flipped) or "no variant analysis")


def now() -> float:
    """Monotonic seconds (timings of the flow's phases)."""
    return time.perf_counter()


def build_pool(request: BuildRequest) -> PublishedRWEPool:
    """Generate the synthetic EHR for ``request.seed`` (default 0; ``options["n_patients"]``
    patients, default 20,000), load it into its own database on the study server, compute
    every study's reference answers and trap panel (validated) and write vN, named
    ``request.pool_id`` (default ``rwe-synthetic``); returns the version with what each part
    cost (the RWE kit's build)."""
    unknown = sorted(set(request.options) - {"n_patients"})
    n_patients = request.option("n_patients", 20_000)
    if unknown or not isinstance(n_patients, int) or isinstance(n_patients, bool):
        raise InputDataError("options", "the rwe kit takes one build option, n_patients "
                                        "(an integer)")
    seed = request.seed or 0
    cards = load_cards(request.tasks or None)
    loaded = generate_load(seed, n_patients)
    start = now()
    builds = [analyse_study(s, loaded.database) for s in cards]
    validate(builds)
    return publish(request.pool_id or "rwe-synthetic", request.out, seed, n_patients, loaded,
                   builds, (loaded.generate_s, loaded.load_s, now() - start))
