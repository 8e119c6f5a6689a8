"""``mimiciv_derived`` tables, computed from the generated base tables (mimic-code definitions).

``age``, ``icustay_detail``, ``first_day_lab`` (window intime − 6 h … intime + 24 h) and
``kdigo_stages`` (creatinine criteria) follow mimic-code's SQL on the base tables.
``first_day_sofa`` is the planted split of the generator's severity (:mod:`tasks_lib.rwe.icu_plan`)
and ``sepsis3`` its Sepsis-3 flag with the template's suspected-infection times; the ICU event
tables are written so that mimic-code's own ``first_day_sofa.sql`` / ``sepsis3.sql`` /
``kdigo_stages.sql`` give the same components, flags and stages
(``tests/tasks_lib/rwe/test_icu_concepts.py``). ``aki_stage_uo`` and ``aki_stage_crrt`` are
NULL (no weight, no CRRT charted).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from tasks_lib.rwe import vocab

Rng = np.random.Generator
SOFA_PARTS = ["respiration", "coagulation", "liver", "cardiovascular", "cns", "renal"]
FIRST_DAY_LABS = {"albumin": "albumin", "bun": "bun", "creatinine": "creatinine",
                  "glucose": "glucose", "sodium": "sodium", "potassium": "potassium",
                  "wbc": "wbc", "platelets": "platelets", "bilirubin_total": "bilirubin",
                  "inr": "inr"}
"""first_day_lab column stem → vocab lab (mimic-code's names)."""


def derived_tables(rng: Rng, tables: dict[str, pd.DataFrame],
                   stays: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Every ``mimiciv_derived`` table."""
    adm, pat = tables["mimiciv_hosp.admissions"], tables["mimiciv_hosp.patients"]
    icu, labs = tables["mimiciv_icu.icustays"], tables["mimiciv_hosp.labevents"]
    sofa = first_day_sofa(stays)
    return {"mimiciv_derived.age": age(adm, pat),
            "mimiciv_derived.icustay_detail": icustay_detail(icu, adm, pat),
            "mimiciv_derived.first_day_sofa": sofa,
            "mimiciv_derived.sepsis3": sepsis3(rng, stays, sofa),
            "mimiciv_derived.first_day_lab": first_day_lab(icu, labs),
            "mimiciv_derived.kdigo_stages": kdigo_stages(icu, labs)}


def age(adm: pd.DataFrame, pat: pd.DataFrame) -> pd.DataFrame:
    """``age``: anchor_age + year(admittime) − anchor_year per admission."""
    m = adm[["subject_id", "hadm_id", "admittime"]].merge(
        pat[["subject_id", "anchor_age", "anchor_year"]], on="subject_id")
    m["age"] = m["anchor_age"] + m["admittime"].dt.year - m["anchor_year"]
    return m.sort_values("hadm_id", ignore_index=True)


def icustay_detail(icu: pd.DataFrame, adm: pd.DataFrame, pat: pd.DataFrame) -> pd.DataFrame:
    """``icustay_detail`` as mimic-code computes it (``demographics/icustay_detail.sql``:
    ``hospstay_seq`` ranks the admissions *with an ICU stay*, the window runs over the join;
    ``los_icu`` = whole hours / 24 rounded half up to 2 decimals, as ``ROUND(numeric, 2)``)."""
    m = icu.merge(adm, on=["subject_id", "hadm_id"]).merge(pat, on="subject_id")
    m["hospstay_seq"] = m.groupby("subject_id")["admittime"].rank(method="dense").astype(
        np.int64)
    hours = (m["outtime"].dt.floor("h") - m["intime"].dt.floor("h")).dt.total_seconds() // 3600
    seq = m.groupby("hadm_id")["intime"].rank(method="dense").astype(np.int64)
    out = pd.DataFrame({
        "subject_id": m["subject_id"], "hadm_id": m["hadm_id"], "stay_id": m["stay_id"],
        "gender": m["gender"], "dod": m["dod"], "admittime": m["admittime"],
        "dischtime": m["dischtime"],
        "los_hospital": (m["dischtime"].dt.normalize() - m["admittime"].dt.normalize()).dt.days,
        "admission_age": m["anchor_age"] + m["admittime"].dt.year - m["anchor_year"],
        "race": m["race"], "hospital_expire_flag": m["hospital_expire_flag"],
        "hospstay_seq": m["hospstay_seq"], "first_hosp_stay": m["hospstay_seq"] == 1,
        "icu_intime": m["intime"], "icu_outtime": m["outtime"],
        "los_icu": np.floor(hours * 100 / 24 + 0.5) / 100, "icustay_seq": seq,
        "first_icu_stay": seq == 1})
    return out.sort_values("stay_id", ignore_index=True)


def _split(rng: Rng, total: NDArray[Any]) -> NDArray[Any]:
    """Split each total into six components of 0–4 (total capped at 24)."""
    total = np.minimum(np.asarray(total, dtype=np.int64), 24)
    parts = np.stack([rng.multinomial(t, [1 / 6] * 6) for t in total]) if len(total) else \
        np.zeros((0, 6), np.int64)
    for _ in range(6):
        excess = np.clip(parts - 4, 0, None)
        parts = np.minimum(parts, 4) + np.roll(excess, 1, axis=1)
    return parts


def first_day_sofa(stays: pd.DataFrame) -> pd.DataFrame:
    """``first_day_sofa``: the planted components (``sofa_<part>``, chosen by
    :mod:`tasks_lib.rwe.icu_plan`, which mimic-code's first_day_sofa.sql gives on the generated
    events) and their sum, the planted total."""
    parts = stays[[f"sofa_{c}" for c in SOFA_PARTS]].to_numpy(dtype=np.int64)
    out = pd.DataFrame(parts, columns=SOFA_PARTS)
    out.insert(0, "sofa", parts.sum(axis=1))
    for c in ("stay_id", "hadm_id", "subject_id"):
        out.insert(0, c, stays[c].to_numpy())
    return out.sort_values("stay_id", ignore_index=True)


def _hours(h: NDArray[Any]) -> NDArray[Any]:
    return np.asarray((np.asarray(h) * 3600).astype("timedelta64[s]"))


def sepsis3(rng: Rng, stays: pd.DataFrame, sofa: pd.DataFrame) -> pd.DataFrame:
    """``sepsis3``: one row per stay with a suspected infection; SOFA at that time."""
    st = stays[stays["infection_h"].notna()].reset_index(drop=True)
    n = len(st)
    abx = st["intime"] + _hours(st["infection_h"].to_numpy())
    culture = abx - _hours(rng.uniform(0, 6, n))
    first_day = st["stay_id"].map(sofa.set_index("stay_id")["sofa"]).to_numpy()
    score = np.where(st["sepsis3"], first_day, rng.integers(0, 2, n))
    parts = _split(rng, score)
    out = pd.DataFrame({"subject_id": st["subject_id"], "stay_id": st["stay_id"],
                        "antibiotic_time": abx, "culture_time": culture,
                        "suspected_infection_time": culture,
                        "sofa_time": culture + _hours(rng.uniform(0, 24, n)),
                        "sofa_score": parts.sum(axis=1)})
    for i, c in enumerate(SOFA_PARTS):
        out[c] = parts[:, i]
    out["sepsis3"] = out["sofa_score"] >= 2
    return out.sort_values("stay_id", ignore_index=True)


def _stay_labs(icu: pd.DataFrame, labs: pd.DataFrame, items: list[int]) -> pd.DataFrame:
    sel = labs[labs["itemid"].isin(items)][["hadm_id", "itemid", "charttime", "valuenum"]]
    return sel.merge(icu[["subject_id", "hadm_id", "stay_id", "intime", "outtime"]],
                     on="hadm_id")


def first_day_lab(icu: pd.DataFrame, labs: pd.DataFrame) -> pd.DataFrame:
    """``first_day_lab``: min/max per item in [intime − 6 h, intime + 24 h]."""
    ids = {vocab.LABS[v].itemid: stem for stem, v in FIRST_DAY_LABS.items()}
    m = _stay_labs(icu, labs, list(ids))
    m = m[(m["charttime"] >= m["intime"] - pd.Timedelta(hours=6))
          & (m["charttime"] <= m["intime"] + pd.Timedelta(days=1))]
    m = m.assign(stem=m["itemid"].map(ids))
    agg = pd.DataFrame(m.groupby(["stay_id", "stem"])["valuenum"].agg(["min", "max"])
                       .unstack("stem"))
    agg.columns = pd.Index([f"{pair[1]}_{pair[0]}" for pair in agg.columns.to_list()])
    cols = [f"{s}_{fn}" for s in FIRST_DAY_LABS for fn in ("min", "max")]
    out = icu[["subject_id", "stay_id"]].merge(agg.reindex(columns=cols), left_on="stay_id",
                                               right_index=True, how="left")
    return out.sort_values("stay_id", ignore_index=True)


def _creat_stage(c: pd.Series, low7: pd.Series, low48: pd.Series) -> NDArray[Any]:
    """mimic-code kdigo_stages.aki_stage_creat."""
    return np.select(
        [c >= low7 * 3.0, (c >= 4) & ((low48 <= 3.7) | (c >= 1.5 * low7)), c >= low7 * 2.0,
         c >= low48 + 0.3, c >= low7 * 1.5], [3, 3, 2, 1, 1], default=0)


def _past(m: pd.DataFrame, col: str, window: pd.Timedelta, how: str) -> NDArray[Any]:
    """Per row, ``how`` (min/max) of ``col`` over rows of the same stay in (t − window, t]."""
    left = m[["stay_id", "charttime"]].reset_index()
    pairs = left.merge(m[["stay_id", "charttime", col]], on="stay_id", suffixes=("", "_o"))
    keep = (pairs["charttime_o"] <= pairs["charttime"]) & (
        pairs["charttime_o"] > pairs["charttime"] - window)
    agg = pairs[keep].groupby("index")[col].agg(how)
    return np.asarray(agg.reindex(left["index"]).to_numpy())


def kdigo_stages(icu: pd.DataFrame, labs: pd.DataFrame) -> pd.DataFrame:
    """``kdigo_stages`` from creatinine (past-7-day and past-48-h lowest values)."""
    m = _stay_labs(icu, labs, [vocab.LABS["creatinine"].itemid])
    m = m[(m["charttime"] >= m["intime"] - pd.Timedelta(hours=6))
          & (m["charttime"] <= m["outtime"])]
    m = m.sort_values(["stay_id", "charttime"], ignore_index=True)
    m["creat"] = m["valuenum"]
    m["creat_low_past_7day"] = _past(m, "creat", pd.Timedelta(days=7), "min")
    m["creat_low_past_48hr"] = _past(m, "creat", pd.Timedelta(hours=48), "min")
    m["aki_stage_creat"] = _creat_stage(m["creat"], m["creat_low_past_7day"],
                                        m["creat_low_past_48hr"])
    m["aki_stage"] = m["aki_stage_creat"]
    m["aki_stage_smoothed"] = _past(m, "aki_stage", pd.Timedelta(hours=6), "max").astype(
        np.int64)
    for c in ("uo_rt_6hr", "uo_rt_12hr", "uo_rt_24hr", "aki_stage_uo", "aki_stage_crrt"):
        m[c] = np.nan
    return m[["subject_id", "hadm_id", "stay_id", "charttime", "creat_low_past_7day",
              "creat_low_past_48hr", "creat", "aki_stage_creat", "uo_rt_6hr", "uo_rt_12hr",
              "uo_rt_24hr", "aki_stage_uo", "aki_stage_crrt", "aki_stage", "aki_stage_smoothed"]]
