"""The synthetic EHR: determinism, MIMIC-IV names and shapes, derived tables, loading."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import psycopg2
import pytest
import yaml

from tasks_lib.rwe import derived, ehr, load, schema
from tests.tasks_lib.rwe.ehr_db import loaded_db

PINNED = Path(__file__).resolve().parents[3] / "datasets" / "rwe" / "schema" / \
    "mimic_code_columns.yaml"


@pytest.fixture(scope="module")
def small() -> ehr.EHR:
    return ehr.generate(7, 1000)


def test_same_seed_same_hash_other_seed_other_hash(small: ehr.EHR) -> None:
    from tasks_lib.pool_format import content_hash

    csvs = [ehr.table_csvs(small), ehr.table_csvs(ehr.generate(7, 1000)),
            ehr.table_csvs(ehr.generate(8, 1000))]
    first, again, other = (ehr.table_hashes(c) for c in csvs)
    assert first == again
    assert content_hash(csvs[0]) == content_hash(csvs[1])  # the EHR hash (build.py)
    assert content_hash(csvs[0]) != content_hash(csvs[2])
    assert all(first[t] != other[t] for t in ("mimiciv_hosp.patients",
                                              "mimiciv_hosp.labevents"))


def test_columns_are_mimic_codes_names(small: ehr.EHR) -> None:
    pinned = yaml.safe_load(PINNED.read_text())["tables"]
    assert set(small.tables) == set(schema.TABLES) == set(pinned)
    for table, frame in small.tables.items():
        ours = schema.columns(table)
        assert set(ours) <= set(frame.columns), table
        if table == "mimiciv_derived.first_day_lab":
            assert set(ours) <= set(pinned[table])
            assert {"creatinine_max", "glucose_max", "sodium_min", "albumin_min"} <= set(ours)
        else:
            assert ours == pinned[table], table


def test_ids_ranges_time_order_and_coding(small: ehr.EHR) -> None:
    t = small.tables
    pat, adm, icu = (t["mimiciv_hosp.patients"], t["mimiciv_hosp.admissions"],
                     t["mimiciv_icu.icustays"])
    assert pat["subject_id"].between(10_000_000, 19_999_999).all()
    assert adm["hadm_id"].between(20_000_000, 29_999_999).all() and adm["hadm_id"].is_unique
    assert icu["stay_id"].between(30_000_000, 39_999_999).all() and icu["stay_id"].is_unique
    assert pat["anchor_age"].between(18, 91).all()
    assert pat["anchor_year"].between(2110, 2208).all()
    assert set(pat["anchor_year_group"]) == {"2008 - 2010", "2011 - 2013", "2014 - 2016",
                                             "2017 - 2019"}
    m = icu.merge(adm, on=["subject_id", "hadm_id"])
    assert (m["admittime"] < m["intime"]).all() and (m["intime"] < m["outtime"]).all()
    assert (m["outtime"] <= m["dischtime"]).all()
    died = adm[adm["hospital_expire_flag"] == 1]
    assert len(died) and (died["deathtime"] == died["dischtime"]).all()
    assert adm.loc[adm["hospital_expire_flag"] == 0, "deathtime"].isna().all()
    dod = pd.to_datetime(pat.set_index("subject_id")["dod"])
    assert (dod.reindex(died["subject_id"]).to_numpy()
            == died["deathtime"].dt.normalize().to_numpy()).all()
    assert set(t["mimiciv_hosp.diagnoses_icd"]["icd_version"]) == {9, 10}


def test_kdigo_creatinine_rules_by_hand() -> None:
    c = pd.Series([1.6, 1.25, 2.1, 3.1, 1.1, 4.2])
    low7 = pd.Series([1.0, 1.0, 1.0, 1.0, 1.0, 3.0])
    low48 = pd.Series([1.0, 0.9, 1.0, 1.0, 0.95, 3.0])
    # 1.6 >= 1.5x; 1.25 >= 0.9 + 0.3; 2.1 >= 2x; 3.1 >= 3x; 1.1 no rule; 4.2 >= 4 and low48 <= 3.7
    assert list(derived._creat_stage(c, low7, low48)) == [1, 1, 2, 3, 0, 3]


def test_sofa_split_keeps_totals_and_caps_parts() -> None:
    rng = np.random.default_rng(0)
    parts = derived._split(rng, np.array([0, 2, 9, 24, 30]))
    assert list(parts.sum(axis=1)) == [0, 2, 9, 24, 24]
    assert parts.max() <= 4 and parts.min() >= 0


@pytest.fixture(scope="module")
def conn() -> psycopg2.extensions.connection:
    c = psycopg2.connect(**load.dsn(loaded_db().url))
    yield c
    c.close()


def test_database_exposes_every_table_and_column(conn: psycopg2.extensions.connection) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT table_schema || '.' || table_name, column_name "
                    "FROM information_schema.columns WHERE table_schema LIKE 'mimiciv_%' "
                    "ORDER BY ordinal_position")
        got: dict[str, list[str]] = {}
        for table, col in cur.fetchall():
            got.setdefault(table, []).append(col)
    assert got == {t: schema.columns(t) for t in schema.TABLES}
    assert loaded_db().loaded.rows["mimiciv_hosp.patients"] == 8000


def test_first_day_lab_creatinine_max_is_the_window_max(
        conn: psycopg2.extensions.connection) -> None:
    with conn.cursor() as cur:
        cur.execute("""
            SELECT count(*), count(*) FILTER (WHERE f.creatinine_max IS DISTINCT FROM w.mx)
            FROM mimiciv_derived.first_day_lab f
            JOIN mimiciv_icu.icustays ie ON ie.stay_id = f.stay_id
            LEFT JOIN LATERAL (SELECT max(le.valuenum) AS mx FROM mimiciv_hosp.labevents le
                 WHERE le.hadm_id = ie.hadm_id AND le.itemid = 50912
                   AND le.charttime >= ie.intime - interval '6 hours'
                   AND le.charttime <= ie.intime + interval '1 day') w ON true""")
        total, differ = cur.fetchone()
    assert total > 3000 and differ == 0


def test_sepsis3_flag_matches_the_sofa_rule(conn: psycopg2.extensions.connection) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT count(*), count(*) FILTER (WHERE sepsis3 <> (sofa_score >= 2)), "
                    "count(*) FILTER (WHERE sepsis3) FROM mimiciv_derived.sepsis3")
        total, wrong, septic = cur.fetchone()
    assert wrong == 0 and 0 < septic < total
