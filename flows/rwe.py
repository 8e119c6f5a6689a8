"""construct-rwe: generate → load → reference analyses → validate (trap panels) → publish pool
→ audit gate → ledger (``../shared/specs/rwe.md`` §9)."""

from __future__ import annotations

from prefect import flow

from flows import compose
from tasks_lib.pool_publish import publish_version
from tasks_lib.rwe.construct_steps import PublishedRWEPool

compose()  # every kit registered, also when a deployment loads this module


@flow(name="construct-rwe", flow_run_name="construct-rwe-{pool_id}", log_prints=True)
def construct_rwe(seed: int = 0, n_patients: int = 20_000, studies: list[str] | None = None,
                  pool_id: str = "rwe-synthetic", out: str | None = None,
                  audit_override: str | None = None, from_tables: str | None = None,
                  from_db: str | None = None, build_concepts: bool = False) -> PublishedRWEPool:
    """Generate the synthetic EHR for ``seed``, load it into its own database on the study server
    the agents use (``MEDFLOWS_RWE_DB_URL``, else medflows' own cluster; credentials never pass
    through parameters), compute every study's reference answers and trap panel, write the pool
    version, and ledger it after a clean RWE exploit audit (or with ``audit_override``, a
    recorded reason). ``from_tables`` (a folder of MIMIC-layout files) or ``from_db`` (the name
    of a mimic-code database on the study server; ``build_concepts``: build its missing
    base-table concepts with mimic-code's SQL) replace the generator with the user's data.
    The build is the RWE kit's (:func:`tasks_lib.rwe.construct_steps.build_pool`)."""
    from tasks_lib.rwe.construct_steps import build_pool
    from tasks_lib.tracks.base import BuildRequest

    sources = {k: v for k, v in (("from_tables", from_tables), ("from_db", from_db)) if v}
    published = build_pool(BuildRequest(tasks=studies or [], pool_id=pool_id, out=out,
                                        seed=seed, options={"n_patients": n_patients,
                                                            "build_concepts": build_concepts,
                                                            **sources}))
    m = published.manifest
    publish_version(published.url, m, audit_override, len(m.studies))
    print(f"built {m.pool_id} v{m.version}: {len(m.studies)} studies, {m.source.value} EHR "
          f"{m.ehr_hash[:12]} "
          f"(generate {published.generate_s:.1f} s, load {published.load_s:.1f} s, "
          f"analyses {published.analyse_s:.1f} s)")
    return published
