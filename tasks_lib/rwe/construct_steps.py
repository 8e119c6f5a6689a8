"""Prefect steps of the RWE construct flow (``flows/rwe.py``): load cards, generate and load
the EHR, analyse each study, validate the trap and variant panels, write the pool version (the
flow ends with the shared tail, :func:`tasks_lib.pool_publish.publish_version`: the one exploit
audit, then the ledger)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from prefect import get_run_logger, task
from pydantic import Field
from sqlalchemy.engine import make_url

from evaluators.core import Frozen, InputDataError
from tasks_lib.rwe import build, load
from tasks_lib.rwe.analysis_base import StudyDB
from tasks_lib.rwe.pool_files import RWEPoolManifest
from tasks_lib.rwe.studies import load_studies
from tasks_lib.rwe.types import EHRSource, RejectedSeed, SchemaNames, Study

if TYPE_CHECKING:
    from tasks_lib.tracks.base import BuildRequest

MIN_PATIENTS = 8_000
"""Smallest EHR a build accepts: below it the first EHR of a seed passes every trap panel on at
most half the seeds (some planted effects are not significant; measured: docs/rwe.md)."""
RESEED_ATTEMPTS = 6
"""Generator seeds a build tries before it fails (spec §9.3 item 4: re-seed, bounded)."""
RESEED_STRIDE = 1_000_000
"""Attempt ``k`` uses seed ``seed + k·RESEED_STRIDE`` (deterministic: same request, same EHR)."""


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


@task(name="rwe-use-source", task_run_name="rwe-use-{source.value}")
def use_source(source: EHRSource, where: str, analyses: list[str],
               build_concepts: bool = False) -> build.LoadedEHR:
    """The user's data as the study database: ``where`` is a folder of MIMIC-layout files
    (checked, then loaded into its content-addressed database) or the name of a mimic-code
    database on the study server (checked, missing concepts built with mimic-code's SQL when
    ``build_concepts``, fingerprinted, used in place)."""
    from pathlib import Path

    from tasks_lib.rwe import source_db, source_tables

    server = resolve_database(None)
    if source is EHRSource.TABLES:
        loaded = source_tables.load_tables(Path(where), analyses, server)
    else:
        loaded = source_db.use_database(where, server, analyses, build_concepts)
    get_run_logger().info("%s %s: database %s (%s), %d patients", source.value, where,
                          loaded.database, "reused" if loaded.reused else "loaded",
                          loaded.rows.get("mimiciv_hosp.patients", 0))
    return loaded


@task(name="rwe-analyse", task_run_name="rwe-analyse-{study.study_id}")
def analyse_study(study: Study, database: str) -> build.StudyBuild:
    """Reference analysis, answers and trap panel of one study (on the EHR's ``database``; a
    trap that flips nothing is recorded, and judged by :func:`panel_problems`)."""
    return build.build_study(study, StudyDB(database_url(database)), strict=False)


@task(name="rwe-reject-seed", task_run_name="rwe-reject-seed{rejected.seed}")
def reject_seed(rejected: RejectedSeed, loaded: build.LoadedEHR) -> None:
    """Log why the EHR of a seed was rejected and drop its database if this build loaded it
    (one that already existed is kept: another pool may use it)."""
    get_run_logger().warning("seed %d rejected: %s (rule: %s)", rejected.seed,
                             "; ".join(rejected.problems), PANEL_RULE)
    if not loaded.reused:
        load.drop_database(resolve_database(None), loaded.database)


@task(name="rwe-publish")
def publish(pool_id: str, out: str | None, ehr: EHRBuild, n_patients: int,
            timings: tuple[float, float, float],
            source: EHRSource = EHRSource.GENERATED) -> PublishedRWEPool:
    """Write the pool version (version from the ledger: same content ⇒ same version; the shared
    tail, :func:`tasks_lib.pool_publish.publish_version`, audits and ledgers it)."""
    url, manifest = build.write_pool(pool_id, out, ehr.seed, n_patients, ehr.loaded,
                                     SchemaNames(), ehr.builds, ehr.rejected, source)
    return PublishedRWEPool(url=url, manifest=manifest, generate_s=timings[0],
                            load_s=timings[1], analyse_s=timings[2],
                            database_reused=ehr.loaded.reused)


PANEL_RULE = ("every study has a trap panel and each trap flips a scored field; build with "
              "more patients, another --seed, or fix the study card")


def panel_problems(builds: list[build.StudyBuild]) -> list[str]:
    """What makes a set of study builds an invalid pool: a study without traps, a trap that
    flips no scored field (the pool could not tell a careless analysis from the protocol's)."""
    bad = [f"{b.study.study_id}: no trap analysis" for b in builds if not b.traps]
    return bad + [f"{t.study_id}: trap {t.trap} flips nothing" for b in builds
                  for t in b.traps if not t.flipped]


@task(name="rwe-validate")
def validate(builds: list[build.StudyBuild], strict: bool = True) -> None:
    """The pool's construction validity, before it is written (:func:`panel_problems`); other
    valid analyses (variants) that flip a scored field are warned about. Not ``strict`` (the
    user's data: no seed to change), a trap that flips nothing is a warning.

    Raises:
        InputDataError: a study without traps or with a trap that flips nothing (names each).
    """
    bad = panel_problems(builds)
    if bad and not strict:
        get_run_logger().warning("trap panel on the user's data: %s (rule: %s)",
                                 "; ".join(bad), PANEL_RULE)
    elif bad:
        raise InputDataError("trap panel", "; ".join(bad) + f" (rule: {PANEL_RULE})")
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


def attempt_seeds(seed: int) -> list[int]:
    """The generator seeds a build tries, in order: ``seed``, then ``seed + k·RESEED_STRIDE``."""
    return [seed + k * RESEED_STRIDE for k in range(RESEED_ATTEMPTS)]


class EHRBuild(NamedTuple):
    """The EHR a build kept, its study builds, and the seeds rejected before it."""

    seed: int
    loaded: build.LoadedEHR
    builds: list[build.StudyBuild]
    rejected: list[RejectedSeed]


def build_ehr(seed: int, n_patients: int, cards: list[Study]) -> tuple[EHRBuild, list[float]]:
    """Generate, load and analyse the EHR of each of :func:`attempt_seeds` until every study's
    trap panel is valid (spec §9.3: re-seed, bounded, recorded); the databases of rejected
    EHRs are dropped. Returns the kept EHR and the seconds spent generating, loading and
    analysing (over all attempts).

    Raises:
        InputDataError: no attempt gave a valid panel (names every seed and problem).
    """
    rejected: list[RejectedSeed] = []
    spent = [0.0, 0.0, 0.0]
    for ehr_seed in attempt_seeds(seed):
        loaded = generate_load(ehr_seed, n_patients)
        start = now()
        builds = [analyse_study(s, loaded.database) for s in cards]
        spent = [spent[0] + loaded.generate_s, spent[1] + loaded.load_s,
                 spent[2] + now() - start]
        problems = panel_problems(builds)
        if not problems:
            return EHRBuild(ehr_seed, loaded, builds, rejected), spent
        rejected.append(RejectedSeed(seed=ehr_seed, problems=problems))
        reject_seed(rejected[-1], loaded)
    raise InputDataError("trap panel", f"{len(rejected)} seeds tried with {n_patients} "
                         "patients, none discriminates: " + "; ".join(
                             f"seed {r.seed}: {', '.join(r.problems)}" for r in rejected)
                         + f" (rule: {PANEL_RULE})")


SOURCE_OPTIONS = {"from_tables": EHRSource.TABLES, "from_db": EHRSource.DATABASE}
"""Build options naming the user's data instead of the generator."""


def build_from_source(request: BuildRequest, sources: Mapping[str, object]) -> PublishedRWEPool:
    """The user's data (one of :data:`SOURCE_OPTIONS`) as the study database, then the same
    analyses, panels (warnings: there is no seed to change) and pool as a generated EHR."""
    if len(sources) > 1 or not all(isinstance(v, str) for v in sources.values()):
        raise InputDataError("options", "give one of from_tables, from_db (a string)")
    (option, where), = sources.items()
    source = SOURCE_OPTIONS[option]
    cards = load_cards(request.tasks or None)
    start = now()
    loaded = use_source(source, str(where), [c.analysis for c in cards],
                        bool(request.option("build_concepts", False)))
    loading = now() - start
    builds = [analyse_study(s, loaded.database) for s in cards]
    spent = (loaded.generate_s, loaded.load_s or loading, now() - start - loading)
    validate(builds, strict=False)
    patients = loaded.rows.get("mimiciv_hosp.patients", 0)
    return publish(request.pool_id or f"rwe-{source.value}", request.out,
                   EHRBuild(0, loaded, builds, []), patients, spent, source)


def build_pool(request: BuildRequest) -> PublishedRWEPool:
    """Generate the synthetic EHR for ``request.seed`` (default 0; ``options["n_patients"]``
    patients, default 20,000, at least :data:`MIN_PATIENTS`), load it into its own database on
    the study server, compute every study's reference answers and trap panel (re-seeding when a
    trap flips nothing: :func:`build_ehr`) and write vN, named ``request.pool_id`` (default
    ``rwe-synthetic``); returns the version with what each part cost (the RWE kit's build)."""
    unknown = sorted(set(request.options) - {"n_patients", "build_concepts", *SOURCE_OPTIONS})
    n_patients = request.option("n_patients", 20_000)
    if unknown or not isinstance(n_patients, int) or isinstance(n_patients, bool):
        raise InputDataError("options", "the rwe kit takes the build options n_patients (an "
                                        "integer), from_tables (a folder) or from_db (a "
                                        "database name on the study server) and "
                                        "build_concepts (true/false)")
    sources = {k: v for k, v in request.options.items() if k in SOURCE_OPTIONS and v}
    if sources:
        return build_from_source(request, sources)
    if n_patients < MIN_PATIENTS:
        raise InputDataError("n_patients", f"{n_patients}: build with at least {MIN_PATIENTS:,} "
                             "patients (fewer leave some studies' planted effects "
                             "undetectable, so their traps cannot be told from the protocol)")
    cards = load_cards(request.tasks or None)
    ehr, spent = build_ehr(request.seed or 0, n_patients, cards)
    validate(ehr.builds)
    return publish(request.pool_id or "rwe-synthetic", request.out, ehr, n_patients,
                   (spent[0], spent[1], spent[2]))
