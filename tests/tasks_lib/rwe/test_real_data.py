"""Real data in (issue 25 parts 3 and 5): ``pool build rwe --from-tables`` checks MIMIC-layout
files against mimic-code's DDL (refusals name file, line and column) and round-trips generated
rows to the same reference answers; ``--from-db`` refuses a database lacking what the studies
read, and on a database built with mimic-code's own create.sql holding the generated rows it
publishes the studies with the generated pool's reference answers, and the honest scripted
agent reaches SR 1 in the sandbox on studies that together read every table a study reads."""

from __future__ import annotations

import gzip
import io
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import psycopg2
import pytest

from evaluators.core import InputDataError
from tasks_lib.rwe import load, mimic_ddl, needs, schema, source_db, source_tables
from tasks_lib.rwe.analyses import ANALYSES
from tasks_lib.rwe.mimic_ddl import parse_type
from tests.support.cli import invoke


def test_every_analysis_lists_what_it_reads_and_base_tables_are_create_sql() -> None:
    assert needs.unlisted() == []
    official = mimic_ddl.official_tables()
    assert {t: official[t] for t in schema.BASE} == schema.BASE
    assert parse_type("VARCHAR(25) NOT NULL") == ("VARCHAR", 25, True)
    assert parse_type("TIMESTAMP(3)") == ("TIMESTAMP", None, False)
    assert parse_type("DOUBLE PRECISION") == ("DOUBLE PRECISION", None, False)


@pytest.mark.parametrize(("declared", "good", "bad"), [
    ("INTEGER NOT NULL", ["12", "-3", "+7"], ["", "1.5", "x", "3000000000"]),
    ("SMALLINT", ["", "91"], ["40000", "1e3"]),
    ("DOUBLE PRECISION", ["", "1.5", "-2e-3", "NaN"], ["abc", "1,5"]),
    ("TIMESTAMP", ["2150-01-01 10:00:00", "2150-01-01T10:00:00", "2150-01-01"],
     ["2150-13-01 00:00:00", "01/02/2150", "yesterday"]),
    ("DATE", ["2150-02-28"], ["2150-02-30"]),
    ("CHAR(1) NOT NULL", ["F", "M "], ["", "FM"]),
    ("VARCHAR(3)", ["", "abc"], ["abcd"]),
    ("BOOLEAN", ["t", "false", "1"], ["maybe"]),
])
def test_values_copy_would_refuse(declared: str, good: list[str], bad: list[str]) -> None:
    ctype = parse_type(declared)
    assert not source_tables.invalid(pd.Series(good), ctype).any()
    assert source_tables.invalid(pd.Series(bad), ctype).all()


def test_parquet_columns_become_the_text_copy_reads() -> None:
    """Typed Parquet columns (as pandas reads them) → the canonical text: timestamps ISO with a
    space, integer columns stored as floats (nullable ints) without ``.0``, NULL = ""."""
    def text(values: pd.Series, declared: str) -> list[str]:
        return source_tables._as_text(values, parse_type(declared)).tolist()

    stamps = pd.Series(pd.to_datetime(["2150-01-01 10:00:00", None]))
    assert text(stamps, "TIMESTAMP(0)") == ["2150-01-01 10:00:00", ""]
    assert text(pd.Series([20000001.0, float("nan")]), "INTEGER") == ["20000001", ""]
    assert text(pd.Series([1.5, float("nan")]), "DOUBLE PRECISION") == ["1.5", ""]
    assert text(pd.Series(pd.array([True, None], dtype="boolean")), "BOOLEAN") == ["true", ""]
    assert text(pd.Series(["F", None]), "CHAR(1)") == ["F", ""]


def _empty_layout(root: Path) -> Path:
    """Every study-database table as a header-only file of the release layout."""
    for table in schema.TABLES:
        schema_name, name = table.split(".")
        path = root / source_tables.FOLDERS[schema_name] / f"{name}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(",".join(schema.columns(table)) + "\n")
    return root


def _refusal(root: Path) -> str:
    with pytest.raises(InputDataError) as err:
        source_tables.table_csvs(root, ANALYSES.names())
    return str(err.value)


def test_from_tables_refusals_name_file_line_and_column(tmp_path: Path) -> None:
    root = _empty_layout(tmp_path / "mimic")
    assert set(source_tables.table_csvs(root, ANALYSES.names())) == set(schema.TABLES)
    (root / "hosp" / "admissions.csv").rename(root / "hosp" / "admissions.txt")
    assert "missing tables hosp/admissions.csv.gz" in _refusal(root)
    (root / "hosp" / "admissions.txt").rename(root / "hosp" / "admissions.csv")

    patients = root / "hosp" / "patients.csv"
    patients.write_text("subject_id,gender,anchor_age,anchor_year,anchor_year_group,dod,"
                        "eye_colour\n")
    assert _refusal(root) == f"{patients}: unknown column eye_colour (not in " \
        "mimiciv_hosp.patients of mimic-code's create.sql or concepts)"
    patients.write_text("subject_id,gender,anchor_age,anchor_year_group,dod\n")
    assert _refusal(root) == f"{patients}: missing column anchor_year (of mimiciv_hosp.patients)"
    patients.write_text("subject_id,gender,anchor_age,anchor_year,anchor_year_group,dod\n")

    labs = root / "hosp" / "labevents.csv"
    header = ",".join(schema.columns("mimiciv_hosp.labevents"))
    row = "1,10000001,20000001,7,50813,,2150-01-01 10:00:00,,2.1,2.1,mmol/L,,,,,"
    labs.write_text(f'{header}\n{row}"a comment\nover two lines"\n'
                    f"{row.replace('2150-01-01 10:00:00', '2150-01-01 25:00:00')}\n")
    assert _refusal(root) == (f"{labs}:4: column charttime: '2150-01-01 25:00:00' is not of type "
                              "TIMESTAMP(0)")
    labs.write_text(f"{header}\n{row.replace('10000001', '')}\n")
    assert _refusal(root) == f"{labs}:2: column subject_id: empty value in a NOT NULL column"


def test_from_tables_cli_refusal_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    root = _empty_layout(tmp_path / "mimic")
    icu = root / "icu" / "icustays.csv"
    icu.write_text(",".join(schema.columns("mimiciv_icu.icustays")) + "\n1,2,x,,,,,\n")
    out = invoke("pool", "build", "rwe", "--from-tables", str(root), "--out",
                 str(tmp_path / "pool"))
    assert out.exit_code == 2, out.output
    assert out.output.strip() == (f"error: {icu}:2: column stay_id: 'x' is not of type INTEGER")
    assert not (tmp_path / "pool").exists()


@pytest.fixture
def mimic_5432() -> Iterator[str]:
    """A database on the shared server built with mimic-code's create.sql (empty tables)."""
    from tests.tasks_lib.rwe.ehr_db import ADMIN, fresh_database, require_server

    require_server()
    url = fresh_database("fromdb")
    with psycopg2.connect(**load.dsn(url)) as conn, conn.cursor() as cur:
        cur.execute(mimic_ddl.create_sql_path().read_text(encoding="utf-8"))
    conn.close()
    yield url
    load.drop_database(ADMIN, url.rsplit("/", 1)[1])


def test_from_db_refuses_a_database_lacking_what_the_studies_read(mimic_5432: str) -> None:
    def refusal(analyses: list[str]) -> str:
        with pytest.raises(InputDataError) as err:
            source_db.check_database(mimic_5432, analyses)
        return str(err.value)

    name = mimic_5432.rsplit("/", 1)[1]
    text = refusal(["statin_sepsis"])  # create.sql leaves mimiciv_derived empty
    assert text.startswith(f"database {name}: missing mimic-code concepts in mimiciv_derived: "
                           "first_day_sofa (firstday/first_day_sofa.sql), icustay_detail "
                           "(demographics/icustay_detail.sql), sepsis3 (sepsis/sepsis3.sql)")
    assert "postgres-make-concepts.sql" in text and "chartevents" in text
    with psycopg2.connect(**load.dsn(mimic_5432)) as conn, conn.cursor() as cur:
        for table in needs.STAYS:
            cur.execute(schema.create_sql(table))
        cur.execute("ALTER TABLE mimiciv_hosp.prescriptions DROP COLUMN starttime")
        cur.execute("DROP TABLE mimiciv_hosp.diagnoses_icd")
    conn.close()
    assert refusal(["statin_sepsis"]) == (f"database {name}: missing columns mimiciv_hosp."
                                          "prescriptions.starttime (the chosen studies read "
                                          "them)")
    text = refusal(["albumin_ap"])
    assert "missing tables mimiciv_hosp.diagnoses_icd" in text
    assert "kdigo_stages (organfailure/kdigo_stages.sql)" in text
    out = invoke("pool", "build", "rwe", "--from-db", mimic_5432, "--studies", "statin-sepsis")
    assert out.exit_code == 2 and out.output.count("error:") == 1
    assert "prescriptions.starttime" in out.output


def test_from_db_keeps_comments_it_does_not_own(mimic_5432: str) -> None:
    """The fingerprint goes into the database comment: not over the user's own comment, and
    never on a generated EHR's database (its pools would stop matching)."""
    from tests.tasks_lib.rwe.ehr_db import ADMIN

    name = mimic_5432.rsplit("/", 1)[1]
    conn = psycopg2.connect(**load.dsn(ADMIN))
    conn.autocommit = True
    generated = "rwe_" + "ab" * 8
    try:
        with conn.cursor() as cur:
            cur.execute(f"COMMENT ON DATABASE {name} IS 'our MIMIC-IV 3.1'")
            with pytest.raises(InputDataError, match="has a comment of its own"):
                source_db.mark(ADMIN, name, "f" * 64)
            cur.execute(f"COMMENT ON DATABASE {name} IS NULL")
            source_db.mark(ADMIN, name, "f" * 64)
            cur.execute(f"DROP DATABASE IF EXISTS {generated}")
            cur.execute(f"CREATE DATABASE {generated}")
            cur.execute(f"COMMENT ON DATABASE {generated} IS '{load.MARK}{'ab' * 32}'")
            with pytest.raises(InputDataError, match="holds a generated EHR"):
                source_db.check_mark(ADMIN, generated)
            cur.execute(f"SELECT shobj_description(oid, 'pg_database') FROM pg_database "
                        f"WHERE datname = '{name}'")
            assert cur.fetchone()[0] == load.MARK + "f" * 64
    finally:
        load.drop_database(ADMIN, generated)
        conn.close()


def _same_reference(pool_url: str) -> None:
    """The pool at ``pool_url`` has the generated pool's studies, MCQ keys, printed values and
    reference cohorts (byte for byte)."""
    from tasks_lib.rwe.pool_files import cohort_key, load_study_pool
    from tasks_lib.storage import Storage
    from tests.tasks_lib.rwe.pool_support import built_pool

    generated, pool = Storage(built_pool().url), Storage(pool_url)
    want, got = load_study_pool(generated), load_study_pool(pool)
    assert got.manifest.studies == want.manifest.studies
    for study in got.manifest.studies:
        a, b = got.answers[study], want.answers[study]
        assert a.mcq == b.mcq and a.cohort_size == b.cohort_size, study
        assert {f: x.printed for f, x in a.fields.items()} == {
            f: x.printed for f, x in b.fields.items()}, study
        assert pool.read_bytes(cohort_key(study)) == generated.read_bytes(cohort_key(study))


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_from_tables_round_trip_gives_the_generated_reference_answers(tmp_path: Path) -> None:
    """Generated rows written as release-layout files (gzip CSV, timestamps with a space) are
    loaded by the kit's build into a database of their own and give the generated pool's
    reference answers and cohorts."""
    from tasks_lib.rwe.construct_steps import build_pool
    from tasks_lib.rwe.types import EHRSource
    from tasks_lib.tracks.base import BuildRequest
    from tests.tasks_lib.rwe.ehr_db import N_PATIENTS, generated, loaded_db
    from tests.tasks_lib.rwe.pool_support import study_cluster

    server = study_cluster()[1].url()  # before the build: it loads into the settings' cluster
    root = tmp_path / "mimic"
    for table, data in generated(0, N_PATIENTS)[1].items():
        schema_name, name = table.split(".")
        path = root / source_tables.FOLDERS[schema_name] / f"{name}.csv.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = re.sub(rb"(\d{4}-\d\d-\d\d)T(\d\d:)", rb"\1 \2", data)
        # any level reads the same; level 9 costs 2.5 s more CPU at this size
        path.write_bytes(gzip.compress(text, compresslevel=1))
    published = build_pool(BuildRequest(tasks=[], pool_id="rwe-tables-test",
                                        out=str(tmp_path / "pool"),
                                        options={"from_tables": str(root)}))
    m = published.manifest
    try:
        assert m.source is EHRSource.TABLES and not published.database_reused
        assert m.database != loaded_db().loaded.database and m.n_patients == N_PATIENTS
        _same_reference(published.url)
    finally:
        load.drop_database(server, m.database)


SANDBOXED = ["statin-sepsis", "albumin-ap", "diuretic-hyponatremia-hf"]
"""The studies the honest agent runs in the sandbox on the ``--from-db`` pool: together they read
every table any study reads (the others' answers are the build's, checked equal to the
generated pool's; tests/tasks_lib/rwe/test_agents.py runs the agent on every study)."""


def test_sandboxed_studies_read_every_table_a_study_reads() -> None:
    from tasks_lib.rwe.studies import load_study

    read = {s: set(needs.BY_ANALYSIS[load_study(s).analysis]) for s in SANDBOXED}
    assert set().union(*read.values()) == set().union(*map(set, needs.BY_ANALYSIS.values()))


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed")
def test_from_db_on_mimic_code_database_same_answers_and_honest_sr_1(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    import json

    from prefect.logging.configuration import setup_logging
    from sqlalchemy.engine import make_url
    from support.isolated import own_storage_and_ledger

    from tasks_lib.rwe.pool_files import load_study_pool
    from tasks_lib.rwe.types import EHRSource
    from tasks_lib.scoring import score_one
    from tasks_lib.storage import Storage
    from tests.tasks_lib.rwe.ehr_db import ADMIN
    from tests.tasks_lib.rwe.mimic_db import mimic_database
    from tests.tasks_lib.rwe.pool_support import built_pool, study_cluster
    from tests.tasks_lib.rwe.test_agents import rwe_cell

    generated = load_study_pool(Storage(built_pool().url))  # before the ledger changes
    url = mimic_database()
    assert source_db.missing_indexes(url) == []
    source_db.check_on_study_server(url, study_cluster()[1].url())
    with pytest.raises(InputDataError, match="is not on the study server"):
        source_db.check_on_study_server(ADMIN, study_cluster()[1].url())
    setup_logging()
    with own_storage_and_ledger(tmp_path_factory.mktemp("rwe-from-db")):
        out = invoke("pool", "build", "rwe", "--from-db", url, "--json")
        assert out.exit_code == 0, out.output
        summary = json.loads(out.stdout)
        pool_url = summary["manifest"].removesuffix("/manifest.json")
        pool = load_study_pool(Storage(pool_url))
        assert pool.manifest.source is EHRSource.DATABASE
        assert pool.manifest.database == make_url(url).database
        assert pool.manifest.studies == generated.manifest.studies
        assert json.loads(Storage(pool_url).read_text("audit.json"))["report"]["clean"]
        _same_reference(pool_url)  # every study's analyses on create.sql's column types
        for study in SANDBOXED:
            record = rwe_cell("rwe-honest", study, pool=pool_url)
            m = score_one(record.run_id).metrics
            assert (m["rwe_acc"], m["rwe_rar"], m["rwe_sr"], m["rwe_cr"]) == (1, 1, 1, 1), study


def test_mimic_code_concepts_on_generated_base_tables_agree_with_the_generator(
        mimic_5432: str) -> None:
    """``--build-concepts`` runs mimic-code's concept SQL; on the generated base tables it gives
    the generator's ``age``, ``icustay_detail`` and ``first_day_lab`` (the columns medflows
    builds) column for column."""
    from sqlalchemy import create_engine

    from tasks_lib.rwe import concepts, ehr
    from tests.tasks_lib.rwe.ehr_db import ADMIN
    from tests.tasks_lib.rwe.mimic_db import fill

    csvs = ehr.table_csvs(ehr.generate(0, 1000))
    built = ["mimiciv_derived.age", "mimiciv_derived.icustay_detail",
             "mimiciv_derived.first_day_lab"]
    fill(mimic_5432, {t: b for t, b in csvs.items() if t not in built})  # chart-based: given
    assert source_db.missing_buildable(mimic_5432, ANALYSES.names()) == sorted(built[1:])
    with pytest.raises(InputDataError, match="add --build-concepts"):
        source_db.check_database(mimic_5432, ANALYSES.names())
    name = mimic_5432.rsplit("/", 1)[1]
    loaded = source_db.use_database(name, ADMIN, ANALYSES.names(), build_concepts=True)
    assert loaded.reused and loaded.rows["mimiciv_derived.first_day_lab"] == 745
    assert concepts.build(mimic_5432, built[:1]) == ["demographics/age.sql"]
    engine = create_engine(mimic_5432)

    def both(table: str, key: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        cols = ", ".join(schema.columns(table))
        got = pd.read_sql(f"SELECT {cols} FROM {table} ORDER BY {key}", engine)
        want = pd.read_csv(io.BytesIO(csvs[table]), parse_dates=True)
        return got, want.sort_values(key, ignore_index=True)

    got, want = both("mimiciv_derived.age", "hadm_id")
    assert got["age"].tolist() == want["age"].tolist()
    got, want = both("mimiciv_derived.icustay_detail", "stay_id")
    for col in ("subject_id", "hadm_id", "admission_age", "first_icu_stay", "icustay_seq",
                "hospital_expire_flag", "gender", "hospstay_seq", "first_hosp_stay",
                "los_hospital"):
        assert got[col].tolist() == want[col].tolist(), col
    assert (pd.to_datetime(got["icu_intime"]) == pd.to_datetime(want["icu_intime"])).all()
    assert got["los_icu"].astype(float).tolist() == want["los_icu"].tolist()
    got, want = both("mimiciv_derived.first_day_lab", "stay_id")
    for col in schema.columns("mimiciv_derived.first_day_lab"):
        assert got[col].astype(float).equals(want[col].astype(float)), col
    engine.dispose()
