"""mimic-code's own concept SQL for the derived tables that need only the hosp/icu base tables
(``datasets/rwe/schema/mimic-code/concepts_postgres/``, copied verbatim with mimic-code's MIT
licence; source commit in ``SOURCE.yaml``).

``pool build rwe --from-db URL --build-concepts`` runs them in the user's database for the
concepts the chosen studies need and it lacks, as mimic-code's ``postgres-make-concepts.sql``
would (each file drops and creates its table in ``mimiciv_derived``). ``first_day_sofa``,
``sepsis3`` and ``kdigo_stages`` need the ICU event tables (``chartevents``, ``inputevents``,
``outputevents``) and their own chains of concepts: they are not built here.
"""

from __future__ import annotations

from pathlib import Path

import psycopg2

from tasks_lib.rwe import load

BUILDABLE: dict[str, tuple[str, ...]] = {
    "mimiciv_derived.age": ("demographics/age.sql",),
    "mimiciv_derived.icustay_detail": ("demographics/icustay_detail.sql",),
    "mimiciv_derived.first_day_lab": (
        "measurement/complete_blood_count.sql", "measurement/chemistry.sql",
        "measurement/blood_differential.sql", "measurement/coagulation.sql",
        "measurement/enzyme.sql", "firstday/first_day_lab.sql"),
}
"""Derived table → the mimic-code concept files that build it, in order (dependencies first)."""


def concepts_dir() -> Path:
    """The stored ``concepts_postgres`` folder."""
    from tasks_lib.rwe.mimic_ddl import create_sql_path

    return create_sql_path().parent / "concepts_postgres"


def build(url: str, tables: list[str]) -> list[str]:
    """Run the concept files of ``tables`` (each in :data:`BUILDABLE`) in the database at
    ``url``, in one transaction; returns the files run."""
    files = list(dict.fromkeys(f for t in tables for f in BUILDABLE[t]))
    with psycopg2.connect(**load.dsn(url)) as conn, conn.cursor() as cur:
        for name in files:
            cur.execute((concepts_dir() / name).read_text(encoding="utf-8"))
    conn.close()
    return files
