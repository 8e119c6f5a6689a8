"""The ICU event tables (and ``microbiologyevents``) of the study database, column for column as
mimic-code's ``create.sql`` (``datasets/rwe/schema/mimic-code/``; a test checks they match).

The generator writes them (:mod:`tasks_lib.rwe.icu_events`) so that mimic-code's own concept SQL
(``first_day_sofa``, ``sepsis3``, ``kdigo_stages`` and their chains) runs on a generated
database as on MIMIC-IV.
"""

from __future__ import annotations

ICU: dict[str, list[tuple[str, str]]] = {
    "mimiciv_hosp.microbiologyevents": [
        ("microevent_id", "INTEGER NOT NULL"), ("subject_id", "INTEGER NOT NULL"),
        ("hadm_id", "INTEGER"), ("micro_specimen_id", "INTEGER NOT NULL"),
        ("order_provider_id", "VARCHAR(10)"), ("chartdate", "TIMESTAMP(0) NOT NULL"),
        ("charttime", "TIMESTAMP(0)"), ("spec_itemid", "INTEGER NOT NULL"),
        ("spec_type_desc", "VARCHAR(100) NOT NULL"), ("test_seq", "INTEGER NOT NULL"),
        ("storedate", "TIMESTAMP(0)"), ("storetime", "TIMESTAMP(0)"), ("test_itemid", "INTEGER"),
        ("test_name", "VARCHAR(100)"), ("org_itemid", "INTEGER"), ("org_name", "VARCHAR(100)"),
        ("isolate_num", "SMALLINT"), ("quantity", "VARCHAR(50)"), ("ab_itemid", "INTEGER"),
        ("ab_name", "VARCHAR(30)"), ("dilution_text", "VARCHAR(10)"),
        ("dilution_comparison", "VARCHAR(20)"), ("dilution_value", "DOUBLE PRECISION"),
        ("interpretation", "VARCHAR(5)"), ("comments", "TEXT")],
    "mimiciv_icu.d_items": [
        ("itemid", "INTEGER NOT NULL"), ("label", "VARCHAR(100) NOT NULL"),
        ("abbreviation", "VARCHAR(50) NOT NULL"), ("linksto", "VARCHAR(30) NOT NULL"),
        ("category", "VARCHAR(50) NOT NULL"), ("unitname", "VARCHAR(50)"),
        ("param_type", "VARCHAR(20) NOT NULL"), ("lownormalvalue", "FLOAT"),
        ("highnormalvalue", "FLOAT")],
    "mimiciv_icu.chartevents": [
        ("subject_id", "INTEGER NOT NULL"), ("hadm_id", "INTEGER NOT NULL"),
        ("stay_id", "INTEGER NOT NULL"), ("caregiver_id", "INTEGER"),
        ("charttime", "TIMESTAMP NOT NULL"), ("storetime", "TIMESTAMP"),
        ("itemid", "INTEGER NOT NULL"), ("value", "VARCHAR(200)"), ("valuenum", "FLOAT"),
        ("valueuom", "VARCHAR(20)"), ("warning", "SMALLINT")],
    "mimiciv_icu.inputevents": [
        ("subject_id", "INTEGER NOT NULL"), ("hadm_id", "INTEGER NOT NULL"),
        ("stay_id", "INTEGER"), ("caregiver_id", "INTEGER"), ("starttime", "TIMESTAMP NOT NULL"),
        ("endtime", "TIMESTAMP NOT NULL"), ("storetime", "TIMESTAMP"),
        ("itemid", "INTEGER NOT NULL"), ("amount", "FLOAT"), ("amountuom", "VARCHAR(20)"),
        ("rate", "FLOAT"), ("rateuom", "VARCHAR(20)"), ("orderid", "INTEGER NOT NULL"),
        ("linkorderid", "INTEGER"), ("ordercategoryname", "VARCHAR(50)"),
        ("secondaryordercategoryname", "VARCHAR(50)"),
        ("ordercomponenttypedescription", "VARCHAR(100)"),
        ("ordercategorydescription", "VARCHAR(30)"), ("patientweight", "FLOAT"),
        ("totalamount", "FLOAT"), ("totalamountuom", "VARCHAR(50)"), ("isopenbag", "SMALLINT"),
        ("continueinnextdept", "SMALLINT"), ("statusdescription", "VARCHAR(20)"),
        ("originalamount", "FLOAT"), ("originalrate", "FLOAT")],
    "mimiciv_icu.outputevents": [
        ("subject_id", "INTEGER NOT NULL"), ("hadm_id", "INTEGER NOT NULL"),
        ("stay_id", "INTEGER NOT NULL"), ("caregiver_id", "INTEGER"),
        ("charttime", "TIMESTAMP(3) NOT NULL"), ("storetime", "TIMESTAMP(3) NOT NULL"),
        ("itemid", "INTEGER NOT NULL"), ("value", "FLOAT NOT NULL"), ("valueuom", "VARCHAR(20)")],
}
"""Table → (column, declared type) in create.sql order."""
