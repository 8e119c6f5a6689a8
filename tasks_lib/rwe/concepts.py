"""mimic-code's own concept SQL for the derived tables the studies read
(``datasets/rwe/schema/mimic-code/concepts_postgres/``, copied verbatim with mimic-code's MIT
licence; source commit in ``SOURCE.yaml``).

``pool build rwe --from-db URL --build-concepts`` runs them in the user's database for the
concepts the chosen studies need and it lacks, as mimic-code's ``postgres-make-concepts.sql``
would (each file drops and creates its table in ``mimiciv_derived``; the files run in that
script's order, so every concept's inputs exist before it). ``first_day_sofa``, ``sepsis3`` and
``kdigo_stages`` read the ICU event tables (``chartevents``, ``inputevents``, ``outputevents``)
and ``microbiologyevents``; the generated EHR writes them, so the same files also run on a
generated database (``tests/tasks_lib/rwe/test_icu_concepts.py``).
"""

from __future__ import annotations

from pathlib import Path

import psycopg2

from evaluators.core import InputDataError
from tasks_lib.rwe import load

_LAB = ("measurement/complete_blood_count.sql", "measurement/chemistry.sql",
        "measurement/blood_differential.sql", "measurement/coagulation.sql",
        "measurement/enzyme.sql", "firstday/first_day_lab.sql")
_BG_VENT = ("measurement/bg.sql", "measurement/oxygen_delivery.sql",
            "measurement/ventilator_setting.sql", "treatment/ventilation.sql")
_VASO = ("medication/dobutamine.sql", "medication/dopamine.sql", "medication/epinephrine.sql",
         "medication/norepinephrine.sql")
_UO = ("demographics/weight_durations.sql", "measurement/urine_output.sql")

BUILDABLE: dict[str, tuple[str, ...]] = {
    "mimiciv_derived.age": ("demographics/age.sql",),
    "mimiciv_derived.icustay_detail": ("demographics/icustay_detail.sql",),
    "mimiciv_derived.first_day_lab": _LAB,
    "mimiciv_derived.first_day_sofa": (
        *_LAB, *_BG_VENT, *_VASO, "measurement/urine_output.sql", "measurement/gcs.sql",
        "measurement/vitalsign.sql", "firstday/first_day_gcs.sql",
        "firstday/first_day_urine_output.sql", "firstday/first_day_vitalsign.sql",
        "firstday/first_day_sofa.sql"),
    "mimiciv_derived.kdigo_stages": (
        *_UO, "organfailure/kdigo_uo.sql", "organfailure/kdigo_creatinine.sql",
        "treatment/crrt.sql", "organfailure/kdigo_stages.sql"),
    "mimiciv_derived.sepsis3": (
        "demographics/icustay_times.sql", "demographics/icustay_hourly.sql", *_UO, *_LAB[:-1],
        *_BG_VENT, *_VASO, "measurement/gcs.sql", "measurement/urine_output_rate.sql",
        "measurement/vitalsign.sql", "medication/antibiotic.sql", "postgres-concept-index.sql",
        "score/sofa.sql", "sepsis/suspicion_of_infection.sql", "sepsis/sepsis3.sql"),
}
"""Derived table → the mimic-code concept files it needs (its chain, itself last)."""

ORDER: tuple[str, ...] = (
    "demographics/icustay_times.sql", "demographics/icustay_hourly.sql",
    "demographics/weight_durations.sql", "measurement/urine_output.sql",
    "organfailure/kdigo_uo.sql", "demographics/age.sql", "demographics/icustay_detail.sql",
    "measurement/bg.sql", "measurement/blood_differential.sql", "measurement/chemistry.sql",
    "measurement/coagulation.sql", "measurement/complete_blood_count.sql",
    "measurement/enzyme.sql", "measurement/gcs.sql", "measurement/oxygen_delivery.sql",
    "measurement/urine_output_rate.sql", "measurement/ventilator_setting.sql",
    "measurement/vitalsign.sql", "medication/antibiotic.sql", "medication/dobutamine.sql",
    "medication/dopamine.sql", "medication/epinephrine.sql", "medication/norepinephrine.sql",
    "treatment/crrt.sql", "treatment/ventilation.sql", "firstday/first_day_gcs.sql",
    "firstday/first_day_lab.sql", "firstday/first_day_urine_output.sql",
    "firstday/first_day_vitalsign.sql", "organfailure/kdigo_creatinine.sql",
    "postgres-concept-index.sql", "score/sofa.sql", "sepsis/suspicion_of_infection.sql",
    "organfailure/kdigo_stages.sql", "firstday/first_day_sofa.sql", "sepsis/sepsis3.sql")
"""Every stored file in the order of mimic-code's ``postgres-make-concepts.sql``."""

EVENTS: dict[str, tuple[str, ...]] = {
    "mimiciv_derived.first_day_sofa": ("mimiciv_icu.chartevents", "mimiciv_icu.inputevents",
                                       "mimiciv_icu.outputevents"),
    "mimiciv_derived.kdigo_stages": ("mimiciv_icu.outputevents",),
    "mimiciv_derived.sepsis3": ("mimiciv_icu.chartevents", "mimiciv_icu.inputevents",
                                "mimiciv_icu.outputevents", "mimiciv_hosp.microbiologyevents"),
}
"""Concept → the event tables it reads that a database may hold empty (create.sql makes them
all; a database loaded without them would score every stay 0 without a word)."""


def concepts_dir() -> Path:
    """The stored ``concepts_postgres`` folder."""
    from tasks_lib.rwe.mimic_ddl import create_sql_path

    return create_sql_path().parent / "concepts_postgres"


def files_for(tables: list[str]) -> list[str]:
    """The concept files that build ``tables`` (each in :data:`BUILDABLE`), in run order."""
    wanted = {f for t in tables for f in BUILDABLE[t]}
    return [f for f in ORDER if f in wanted]


def build(url: str, tables: list[str]) -> list[str]:
    """Run the concept files of ``tables`` (each in :data:`BUILDABLE`) in the database at
    ``url``, in one transaction; returns the files run. A chain file whose table the database
    already has (and that is not asked for) is not run again: the user's concept stays.

    Raises:
        InputDataError: an event table a chosen concept reads is empty (nothing is run).
    """
    with psycopg2.connect(**load.dsn(url)) as conn, conn.cursor() as cur:
        empty = []
        for table in sorted({e for t in tables for e in EVENTS.get(t, ())}):
            cur.execute(f"SELECT EXISTS (SELECT 1 FROM {table})")
            row = cur.fetchone()
            if row is None or not row[0]:
                empty.append(table)
        if empty:
            raise InputDataError(url.rsplit("@", 1)[-1], "--build-concepts: "
                                 f"{', '.join(empty)} empty; mimic-code's "
                                 f"{', '.join(t.split('.')[1] for t in tables if t in EVENTS)} "
                                 "read them (load them with buildmimic/postgres load_gz.sql)")
        cur.execute("SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = 'mimiciv_derived'")
        have = {f"mimiciv_derived.{r[0]}" for r in cur.fetchall()} - set(tables)
        files = [f for f in files_for(tables) if _output(f) not in have]
        for name in files:
            cur.execute((concepts_dir() / name).read_text(encoding="utf-8"))
    conn.close()
    return files


def _output(name: str) -> str:
    """The table a concept file makes (``measurement/bg.sql`` → ``mimiciv_derived.bg``)."""
    return "mimiciv_derived." + Path(name).stem
