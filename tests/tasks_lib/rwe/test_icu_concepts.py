"""mimic-code's own concept SQL on the generated ICU event tables: ``pool build rwe --from-db
… --build-concepts`` on a create.sql database holding a generated EHR without its SOFA,
Sepsis-3 and KDIGO tables builds them from chartevents/inputevents/outputevents/labevents/
microbiologyevents, and they equal the generator's (the planted components, flags and stages)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import pandas as pd
import psycopg2
import pytest

from evaluators.core import InputDataError
from tasks_lib.rwe import build, concepts, ehr, icu_events, icu_plan, load, mimic_ddl, source_db
from tasks_lib.rwe.analyses import ANALYSES

N_PATIENTS = 600
MADE = ["mimiciv_derived.first_day_sofa", "mimiciv_derived.kdigo_stages",
        "mimiciv_derived.sepsis3"]


class Built(NamedTuple):
    url: str
    ehr: ehr.EHR
    loaded: build.LoadedEHR
    run: list[str]


def _created(tag: str) -> str:
    from tests.tasks_lib.rwe.ehr_db import fresh_database, require_server

    require_server()
    url = fresh_database(tag)
    with psycopg2.connect(**load.dsn(url)) as conn, conn.cursor() as cur:
        cur.execute(mimic_ddl.create_sql_path().read_text(encoding="utf-8"))
    conn.close()
    return url


@pytest.fixture(scope="module")
def built(monkeypatch_module: pytest.MonkeyPatch) -> Iterator[Built]:
    """The generated rows (without the three concepts) in a create.sql database, then the
    ``--from-db --build-concepts`` path on it."""
    from tests.tasks_lib.rwe.ehr_db import ADMIN
    from tests.tasks_lib.rwe.mimic_db import fill

    url = _created("icu")
    generated = ehr.generate(0, N_PATIENTS)
    csvs = ehr.table_csvs(generated)
    fill(url, {t: b for t, b in csvs.items() if t not in MADE})
    assert source_db.missing_buildable(url, ANALYSES.names()) == MADE
    run: list[str] = []
    real = concepts.build
    monkeypatch_module.setattr(concepts, "build", lambda u, t: run.extend(real(u, t)) or run)
    loaded = source_db.use_database(url.rsplit("/", 1)[1], ADMIN, ANALYSES.names(),
                                    build_concepts=True)
    yield Built(url, generated, loaded, run)
    load.drop_database(ADMIN, url.rsplit("/", 1)[1])


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _read(url: str, query: str) -> pd.DataFrame:
    from sqlalchemy import create_engine

    engine = create_engine(url)
    try:
        return pd.read_sql(query, engine)
    finally:
        engine.dispose()


def test_build_concepts_runs_mimic_codes_chains_and_keeps_given_concepts(built: Built) -> None:
    assert built.run == [f for f in concepts.files_for(MADE) if f != "firstday/first_day_lab.sql"]
    assert "score/sofa.sql" in built.run and "sepsis/suspicion_of_infection.sql" in built.run
    stays = len(built.ehr.tables["mimiciv_icu.icustays"])
    assert built.loaded.rows["mimiciv_derived.first_day_sofa"] == stays
    given = _read(built.url, "SELECT count(*) AS n FROM information_schema.columns WHERE "
                  "table_schema = 'mimiciv_derived' AND table_name = 'first_day_lab'")
    assert given["n"][0] == 22  # the generator's first_day_lab, not rebuilt (mimic-code's: 80)


def test_first_day_sofa_sql_gives_the_planted_components(built: Built) -> None:
    cols = ["sofa", *icu_plan.PARTS]
    got = _read(built.url, "SELECT * FROM mimiciv_derived.first_day_sofa ORDER BY stay_id")
    got = got[["stay_id", *cols]].fillna(0).astype(int)
    want = built.ehr.tables["mimiciv_derived.first_day_sofa"][["stay_id", *cols]]
    pd.testing.assert_frame_equal(got, want.reset_index(drop=True), check_dtype=False)
    truth = built.ehr.truth.set_index("stay_id").loc[got["stay_id"]]
    assert (got["sofa"].to_numpy() == truth["sofa"].to_numpy()).all()
    assert got[icu_plan.PARTS].nunique().min() >= 2  # every component varies across stays


def test_sepsis3_sql_flags_the_planted_sepsis_stays(built: Built) -> None:
    got = _read(built.url, "SELECT stay_id, bool_or(sepsis3) AS s FROM mimiciv_derived.sepsis3 "
                "GROUP BY stay_id").set_index("stay_id")["s"]
    stays = built.ehr.tables["mimiciv_icu.icustays"]["stay_id"]
    derived = built.ehr.tables["mimiciv_derived.sepsis3"].groupby("stay_id")["sepsis3"].any()
    sql = got.reindex(stays).eq(True).to_numpy()
    ours = derived.reindex(stays).eq(True).to_numpy()
    truth = built.ehr.truth.set_index("stay_id")["sepsis3"].reindex(stays).to_numpy()
    assert sql.sum() > 50 and (sql == ours).all() and (sql == truth).all()
    infected = built.ehr.truth[built.ehr.truth["infection_h"].notna() & ~built.ehr.truth[
        "sepsis3"]]
    assert len(infected) and not got.reindex(infected["stay_id"]).eq(True).any()


def test_kdigo_stages_sql_gives_the_generators_stages(built: Built) -> None:
    got = _read(built.url, "SELECT stay_id, charttime, aki_stage_creat, aki_stage FROM "
                "mimiciv_derived.kdigo_stages WHERE aki_stage_creat IS NOT NULL")
    ours = built.ehr.tables["mimiciv_derived.kdigo_stages"]
    m = ours.merge(got, on=["stay_id", "charttime"], suffixes=("", "_sql"))
    assert len(m) == len(ours)  # every creatinine row of the generator is one of mimic-code's
    assert (m["aki_stage_creat"] == m["aki_stage_creat_sql"]).all()
    assert (m["aki_stage"] == m["aki_stage_sql"]).all() and m["aki_stage"].max() == 3
    uo = _read(built.url, "SELECT count(*) AS n FROM mimiciv_derived.kdigo_stages "
               "WHERE aki_stage_uo IS NOT NULL")
    assert uo["n"][0] == 0  # no weight charted: the urine-output criterion stays NULL


def test_event_tables_use_the_items_in_d_items() -> None:
    small = ehr.generate(1, 300)
    items = small.tables["mimiciv_icu.d_items"].set_index("itemid")["linksto"]
    for table in ("chartevents", "inputevents", "outputevents"):
        used = set(small.tables[f"mimiciv_icu.{table}"]["itemid"])
        assert used and used <= set(items[items == table].index), table
    labs = small.tables["mimiciv_hosp.labevents"]
    assert {i for i, *_ in icu_events.BG_LABS} <= set(labs["itemid"])
    assert set(labs["itemid"]) <= set(small.tables["mimiciv_hosp.d_labitems"]["itemid"])
    assert labs["labevent_id"].is_unique


def test_build_concepts_refuses_empty_event_tables() -> None:
    from tests.tasks_lib.rwe.ehr_db import ADMIN

    url = _created("icu_empty")
    try:
        with pytest.raises(InputDataError, match=r"mimiciv_icu\.chartevents, mimiciv_icu\."
                           r"inputevents, mimiciv_icu\.outputevents empty"):
            concepts.build(url, ["mimiciv_derived.first_day_sofa"])
    finally:
        load.drop_database(ADMIN, url.rsplit("/", 1)[1])


def test_a_stay_of_seconds_keeps_distinct_chart_times_and_a_ventilation_span() -> None:
    """mimic-code averages vital signs charted at one time and drops a ventilation episode
    whose start equals its end: a stay lasting seconds (a death at admission) must not collapse
    its rows onto one second (found at 2,500 patients, seed 1)."""
    import numpy as np

    intime = pd.Timestamp("2150-01-01 10:00:00")
    st = pd.DataFrame({"subject_id": [1, 2], "hadm_id": [3, 4], "stay_id": [5, 6],
                       "intime": [intime, intime], "los_h": [1 / 3600, 30.0]})
    st["outtime"] = st["intime"] + pd.to_timedelta(st["los_h"], unit="h")
    parts = pd.DataFrame({"stay_id": [5, 6], "respiration": [3, 4], "cardiovascular": [1, 1],
                          "cns": [2, 0], "uo_points": [0, 0]})
    span = np.clip(st["los_h"].to_numpy(), 0.25, 20.0)
    bg_h = np.array([0.1, 5.0])
    chart = icu_events.chartevents(np.random.default_rng(0), st, parts, span, bg_h)
    chart["second"] = chart["charttime"].dt.floor("s")
    for stay in (5, 6):
        rows = chart[chart["stay_id"] == stay]
        mbp = rows[rows["itemid"] == 220181]
        assert mbp["second"].nunique() == 2 and (mbp["valuenum"] < 70).sum() == 1
        vent = rows[rows["itemid"] == 223849]["second"].sort_values()
        gas = intime + pd.to_timedelta(bg_h[stay - 5], unit="h")
        assert len(vent) == 2 and vent.iloc[0] < gas < vent.iloc[1]
        gcs = rows[rows["itemid"].isin([220739, 223900, 223901])]["valuenum"].sum()
        assert 10 <= gcs <= 12 if stay == 5 else gcs == 15  # CNS 2 / 0
