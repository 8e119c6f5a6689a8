"""What the studies read from a study database: the tables and columns each registered analysis
(reference, traps, variants) queries, and the mimic-code concepts behind the derived tables.

``pool build rwe --from-db`` refuses a database lacking any of them, naming each, and
``--from-tables`` requires a file for each needed table. Every study also needs the id tables
the scorer reads (:data:`SCORING`). ``tests/tasks_lib/rwe/test_real_data.py`` checks that every
registered analysis is listed here.
"""

from __future__ import annotations

from evaluators.core import InputDataError
from tasks_lib.rwe.analyses import ANALYSES
from tasks_lib.rwe.concepts import BUILDABLE

Needs = dict[str, tuple[str, ...]]
"""Schema-qualified table → columns read."""

SCORING: Needs = {
    "mimiciv_hosp.patients": ("subject_id",),
    "mimiciv_hosp.admissions": ("subject_id", "hadm_id"),
    "mimiciv_icu.icustays": ("subject_id", "hadm_id", "stay_id")}
"""The cohort screen's id index (:mod:`tasks_lib.rwe.scoring`)."""

STAYS: Needs = {
    "mimiciv_derived.icustay_detail": (
        "subject_id", "hadm_id", "stay_id", "admission_age", "first_icu_stay", "los_icu",
        "icu_intime", "hospital_expire_flag", "gender", "dod"),
    "mimiciv_derived.first_day_sofa": ("stay_id", "sofa"),
    "mimiciv_derived.sepsis3": ("stay_id", "sepsis3")}
""":data:`tasks_lib.rwe.analysis_base.BASE_SQL` (every study)."""

_DX: Needs = {"mimiciv_hosp.diagnoses_icd": ("hadm_id", "icd_code", "icd_version")}
_RX: Needs = {"mimiciv_hosp.prescriptions": ("hadm_id", "drug", "starttime")}
_LAB: Needs = {"mimiciv_hosp.labevents": ("hadm_id", "itemid", "charttime", "valuenum")}

BY_ANALYSIS: dict[str, Needs] = {
    "statin_sepsis": _RX,
    "statin_sepsis_cc": _RX,
    "nlr_sepsis_htn": _DX | _LAB,
    "lactate_hf": _DX | _LAB,
    "diuretic_hyponatremia_hf": _DX | _RX | {
        "mimiciv_derived.first_day_lab": ("stay_id", "sodium_min")},
    "albumin_ap": _DX | _LAB | {
        "mimiciv_hosp.d_labitems": ("itemid", "label"),
        "mimiciv_derived.kdigo_stages": ("stay_id", "charttime", "aki_stage")},
    "glucose_ich": _DX | {"mimiciv_derived.first_day_lab": ("stay_id", "glucose_max")},
    "ppi_influenza_null": _DX | _RX,
}
"""Analysis name → what its reference, traps and variants read besides :data:`STAYS`."""

CONCEPTS = {
    "mimiciv_derived.age": "demographics/age.sql",
    "mimiciv_derived.icustay_detail": "demographics/icustay_detail.sql",
    "mimiciv_derived.first_day_lab": "firstday/first_day_lab.sql",
    "mimiciv_derived.first_day_sofa": "firstday/first_day_sofa.sql",
    "mimiciv_derived.sepsis3": "sepsis/sepsis3.sql",
    "mimiciv_derived.kdigo_stages": "organfailure/kdigo_stages.sql",
}
"""Derived table → its mimic-code concept query (under ``mimic-iv/concepts_postgres/``)."""

CONCEPTS_HOWTO = ("build them with mimic-code's concept SQL: cd mimic-code/mimic-iv/"
                  "concepts_postgres && psql -d <database> -v ON_ERROR_STOP=1 -f "
                  "postgres-make-concepts.sql (build_mimic.sh does it by default; "
                  "first_day_sofa, sepsis3 and kdigo_stages need mimiciv_icu.chartevents, "
                  "inputevents and outputevents loaded)")
"""How to build missing ``mimiciv_derived`` concepts."""


def needs(analyses: list[str]) -> Needs:
    """Tables and columns the given analyses (and the scorer) read, merged."""
    out: dict[str, set[str]] = {}
    for name in analyses:
        if name not in BY_ANALYSIS:
            raise KeyError(f"analysis {name!r} has no entry in tasks_lib.rwe.needs.BY_ANALYSIS")
        for part in (SCORING, STAYS, BY_ANALYSIS[name]):
            for table, cols in part.items():
                out.setdefault(table, set()).update(cols)
    return {t: tuple(sorted(c)) for t, c in sorted(out.items())}


def unlisted() -> list[str]:
    """Registered analyses without an entry here (must be empty)."""
    return sorted(set(ANALYSES.names()) - set(BY_ANALYSIS))


def check_layout(where: str, found: dict[str, set[str]], wanted: Needs,
                 built: frozenset[str] = frozenset()) -> None:
    """Refuse a database (``where``) whose tables (``found``: table → columns) lack a needed
    table or column; missing derived concepts (except those medflows will build: ``built``)
    are named with how to build them.

    Raises:
        InputDataError: one line naming every missing table and column.
    """
    base = [t for t in wanted if t not in found and not t.startswith("mimiciv_derived.")]
    concepts = [t for t in wanted if t not in found and t.startswith("mimiciv_derived.")
                and t not in built]
    columns = [f"{t}.{c}" for t, cols in wanted.items() if t in found for c in cols
               if c not in found[t]]
    problems = []
    if base:
        problems.append(f"missing tables {', '.join(base)} (load them with mimic-code's "
                        "buildmimic/postgres: create.sql, then load_gz.sql)")
    if columns:
        problems.append(f"missing columns {', '.join(columns)}")
    if concepts:
        files = ", ".join(f"{t.split('.')[1]} ({CONCEPTS.get(t, '?')})" for t in concepts)
        buildable = [t.split(".")[1] for t in concepts if t in BUILDABLE]
        also = (f" (medflows builds {', '.join(buildable)} with mimic-code's SQL: add "
                "--build-concepts)") if buildable else ""
        problems.append(f"missing mimic-code concepts in mimiciv_derived: {files}; "
                        + CONCEPTS_HOWTO + also)
    if problems:
        raise InputDataError(where, "; ".join(problems) + " (the chosen studies read them)")
