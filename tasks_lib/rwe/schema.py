"""Table definitions of the study database: names, columns and types as mimic-code's
PostgreSQL build (``mimic-iv/buildmimic/postgres/create.sql`` for hosp/icu; the concept
queries' output columns for ``mimiciv_derived``). Only the subset the studies need."""

from __future__ import annotations

from tasks_lib.rwe.icu_schema import ICU

TS = "TIMESTAMP"
BASE: dict[str, list[tuple[str, str]]] = {
    "mimiciv_hosp.patients": [
        ("subject_id", "INTEGER NOT NULL"), ("gender", "CHAR(1) NOT NULL"),
        ("anchor_age", "SMALLINT"), ("anchor_year", "SMALLINT NOT NULL"),
        ("anchor_year_group", "VARCHAR(20) NOT NULL"), ("dod", "DATE")],
    "mimiciv_hosp.admissions": [
        ("subject_id", "INTEGER NOT NULL"), ("hadm_id", "INTEGER NOT NULL"),
        ("admittime", f"{TS} NOT NULL"), ("dischtime", TS), ("deathtime", TS),
        ("admission_type", "VARCHAR(40) NOT NULL"), ("admit_provider_id", "VARCHAR(10)"),
        ("admission_location", "VARCHAR(60)"), ("discharge_location", "VARCHAR(60)"),
        ("insurance", "VARCHAR(255)"), ("language", "VARCHAR(25)"),
        ("marital_status", "VARCHAR(30)"), ("race", "VARCHAR(80)"), ("edregtime", TS),
        ("edouttime", TS), ("hospital_expire_flag", "SMALLINT")],
    "mimiciv_hosp.diagnoses_icd": [
        ("subject_id", "INTEGER NOT NULL"), ("hadm_id", "INTEGER NOT NULL"),
        ("seq_num", "INTEGER NOT NULL"), ("icd_code", "CHAR(7)"), ("icd_version", "SMALLINT")],
    "mimiciv_hosp.d_icd_diagnoses": [
        ("icd_code", "CHAR(7) NOT NULL"), ("icd_version", "SMALLINT NOT NULL"),
        ("long_title", "VARCHAR(255)")],
    "mimiciv_hosp.procedures_icd": [
        ("subject_id", "INTEGER NOT NULL"), ("hadm_id", "INTEGER NOT NULL"),
        ("seq_num", "INTEGER NOT NULL"), ("chartdate", "DATE NOT NULL"),
        ("icd_code", "VARCHAR(7)"), ("icd_version", "SMALLINT")],
    "mimiciv_hosp.d_icd_procedures": [
        ("icd_code", "CHAR(7) NOT NULL"), ("icd_version", "SMALLINT NOT NULL"),
        ("long_title", "VARCHAR(222)")],
    "mimiciv_hosp.d_labitems": [
        ("itemid", "INTEGER NOT NULL"), ("label", "VARCHAR(50)"), ("fluid", "VARCHAR(50)"),
        ("category", "VARCHAR(50)")],
    "mimiciv_hosp.labevents": [
        ("labevent_id", "INTEGER NOT NULL"), ("subject_id", "INTEGER NOT NULL"),
        ("hadm_id", "INTEGER"), ("specimen_id", "INTEGER NOT NULL"),
        ("itemid", "INTEGER NOT NULL"), ("order_provider_id", "VARCHAR(10)"),
        ("charttime", "TIMESTAMP(0)"), ("storetime", "TIMESTAMP(0)"), ("value", "VARCHAR(200)"),
        ("valuenum", "DOUBLE PRECISION"), ("valueuom", "VARCHAR(20)"),
        ("ref_range_lower", "DOUBLE PRECISION"), ("ref_range_upper", "DOUBLE PRECISION"),
        ("flag", "VARCHAR(10)"), ("priority", "VARCHAR(7)"), ("comments", "TEXT")],
    "mimiciv_hosp.prescriptions": [
        ("subject_id", "INTEGER NOT NULL"), ("hadm_id", "INTEGER NOT NULL"),
        ("pharmacy_id", "INTEGER NOT NULL"), ("poe_id", "VARCHAR(25)"), ("poe_seq", "INTEGER"),
        ("order_provider_id", "VARCHAR(10)"), ("starttime", "TIMESTAMP(3)"),
        ("stoptime", "TIMESTAMP(3)"), ("drug_type", "VARCHAR(20) NOT NULL"),
        ("drug", "VARCHAR(255) NOT NULL"), ("formulary_drug_cd", "VARCHAR(50)"),
        ("gsn", "VARCHAR(255)"), ("ndc", "VARCHAR(25)"), ("prod_strength", "VARCHAR(255)"),
        ("form_rx", "VARCHAR(25)"), ("dose_val_rx", "VARCHAR(100)"),
        ("dose_unit_rx", "VARCHAR(50)"), ("form_val_disp", "VARCHAR(50)"),
        ("form_unit_disp", "VARCHAR(50)"), ("doses_per_24_hrs", "REAL"), ("route", "VARCHAR(50)")],
    "mimiciv_icu.icustays": [
        ("subject_id", "INTEGER NOT NULL"), ("hadm_id", "INTEGER NOT NULL"),
        ("stay_id", "INTEGER NOT NULL"), ("first_careunit", "VARCHAR(255)"),
        ("last_careunit", "VARCHAR(255)"), ("intime", TS), ("outtime", TS), ("los", "FLOAT")],
}
BASE |= ICU
"""hosp/icu tables: (column, type) in create.sql order (the ICU event tables:
:mod:`tasks_lib.rwe.icu_schema`)."""

_ID = [("subject_id", "INTEGER"), ("hadm_id", "INTEGER"), ("stay_id", "INTEGER")]
_SOFA = [(c, "INTEGER") for c in ("respiration", "coagulation", "liver", "cardiovascular",
                                  "cns", "renal")]
_LABS = [(f"{s}_{fn}", "DOUBLE PRECISION")
         for s in ("albumin", "bun", "creatinine", "glucose", "sodium", "potassium", "wbc",
                   "platelets", "bilirubin_total", "inr") for fn in ("min", "max")]
DERIVED: dict[str, list[tuple[str, str]]] = {
    "mimiciv_derived.age": [
        ("subject_id", "INTEGER"), ("hadm_id", "INTEGER"), ("admittime", TS),
        ("anchor_age", "SMALLINT"), ("anchor_year", "SMALLINT"), ("age", "BIGINT")],
    "mimiciv_derived.icustay_detail": [
        *_ID, ("gender", "CHAR(1)"), ("dod", "DATE"), ("admittime", TS), ("dischtime", TS),
        ("los_hospital", "INTEGER"), ("admission_age", "BIGINT"), ("race", "VARCHAR(80)"),
        ("hospital_expire_flag", "SMALLINT"), ("hospstay_seq", "BIGINT"),
        ("first_hosp_stay", "BOOLEAN"), ("icu_intime", TS), ("icu_outtime", TS),
        ("los_icu", "NUMERIC"), ("icustay_seq", "BIGINT"), ("first_icu_stay", "BOOLEAN")],
    "mimiciv_derived.first_day_sofa": [*_ID, ("sofa", "INTEGER"), *_SOFA],
    "mimiciv_derived.sepsis3": [
        ("subject_id", "INTEGER"), ("stay_id", "INTEGER"), ("antibiotic_time", TS),
        ("culture_time", TS), ("suspected_infection_time", TS), ("sofa_time", TS),
        ("sofa_score", "INTEGER"), *_SOFA, ("sepsis3", "BOOLEAN")],
    "mimiciv_derived.first_day_lab": [("subject_id", "INTEGER"), ("stay_id", "INTEGER"),
                                      *_LABS],
    "mimiciv_derived.kdigo_stages": [
        *_ID, ("charttime", TS), ("creat_low_past_7day", "NUMERIC"),
        ("creat_low_past_48hr", "NUMERIC"), ("creat", "NUMERIC"), ("aki_stage_creat", "INTEGER"),
        ("uo_rt_6hr", "NUMERIC"), ("uo_rt_12hr", "NUMERIC"), ("uo_rt_24hr", "NUMERIC"),
        ("aki_stage_uo", "INTEGER"), ("aki_stage_crrt", "INTEGER"), ("aki_stage", "INTEGER"),
        ("aki_stage_smoothed", "INTEGER")],
}
"""mimiciv_derived tables built by medflows (same names as mimic-code's concepts)."""

TABLES = {**BASE, **DERIVED}
"""Every table of the study database."""


def columns(table: str) -> list[str]:
    """Column names of ``table`` in order."""
    return [c for c, _ in TABLES[table]]


def create_sql(table: str, schema_map: dict[str, str] | None = None) -> str:
    """``CREATE TABLE`` for ``table`` (schemas renamed through ``schema_map``)."""
    schema, name = table.split(".")
    schema = (schema_map or {}).get(schema, schema)
    cols = ",\n  ".join(f"{c} {t}" for c, t in TABLES[table])
    return f"CREATE TABLE {schema}.{name} (\n  {cols}\n)"
