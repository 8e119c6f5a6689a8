"""Reference and trap analyses of the studies outside sepsis: heart failure (lactate, diuretics),
acute pancreatitis (albumin), intracerebral haemorrhage (glucose) and the influenza negative
control (PPI), registered in ``ANALYSES``."""

from __future__ import annotations

import pandas as pd

from tasks_lib.rwe import stats
from tasks_lib.rwe.analysis_base import (
    ANALYSES,
    AnalysisResult,
    StudyAnalyses,
    StudyDB,
    adult_first,
    cohort_frame,
    died_within,
    drug_flag,
    dx_flag,
    has_dx,
    stays,
    variants,
)

ADJ = ["age", "sofa"]
HF = dx_flag("heart_failure", ["428"], ["I50"])
IN_HF = has_dx(["428"], ["I50"])
LACTATE_SQL = """(SELECT max(le.valuenum) FROM {hosp}.labevents le
  WHERE le.hadm_id = b.hadm_id AND le.itemid = 50813
    AND le.charttime BETWEEN b.intime - interval '6 hours' AND b.intime + interval '24 hours'
  ) AS lactate_max"""


# --- lactate / heart failure (cohort, logistic) ---------------------------------------------

def _lactate(db: StudyDB, adjust: list[str]) -> AnalysisResult:
    df = stays(db, HF, LACTATE_SQL, where=IN_HF)
    df = adult_first(df[df["heart_failure"]]).dropna(subset=["lactate_max"])
    t = pd.qcut(df["lactate_max"], 3, labels=False)
    df = df.assign(t2=(t == 1).astype(int), t3=(t == 2).astype(int), tertile=t,
                   death=df["hospital_expire_flag"].astype(int))
    fit = stats.logistic(df, "death", ["t2", "t3", *adjust])
    values = {"n_cohort": float(len(df))} | fit["t3"].fields("or_t3") | fit["t2"].fields("or_t2")
    values["p_trend"] = stats.logistic(df, "death", ["tertile", *adjust])["tertile"].p
    return AnalysisResult(values, cohort_frame(df, ["age", "heart_failure", "first_icu_stay",
                                                    "lactate_max"]))


def lactate_hf(db: StudyDB) -> AnalysisResult:
    """HF, first ICU stay, age ≥ 18; first-day max lactate tertile → in-hospital death."""
    return _lactate(db, ADJ)


def lactate_hf_crude(db: StudyDB) -> AnalysisResult:
    """Trap: no adjustment (SOFA raises both lactate and death)."""
    return _lactate(db, [])


# --- loop diuretics / hyponatremia in heart failure (cross-sectional, modified Poisson) -----

def _diuretic(db: StudyDB, adjust: list[str]) -> AnalysisResult:
    df = stays(db, HF, drug_flag("loop_diuretic", ["furosemide", "bumetanide", "torsemide"],
                                 -12, 24),
               "(SELECT f.sodium_min FROM {derived}.first_day_lab f "
               "WHERE f.stay_id = b.stay_id) AS sodium_min", where=IN_HF)
    df = adult_first(df[df["heart_failure"]]).dropna(subset=["sodium_min"])
    df = df.assign(loop_diuretic=df["loop_diuretic"].astype(int),
                   hyponatremia=(df["sodium_min"] < 135).astype(int))
    values = {"n_cohort": float(len(df))}
    values |= stats.poisson_robust(df, "hyponatremia", ["loop_diuretic", *adjust])[
        "loop_diuretic"].fields("pr_loop", "p_loop")
    values |= stats.poisson_robust(df, "hyponatremia", ["sofa", "age", "loop_diuretic"])[
        "sofa"].fields("pr_sofa")
    return AnalysisResult(values, cohort_frame(df, ["age", "heart_failure", "first_icu_stay"]))


def diuretic_hf(db: StudyDB) -> AnalysisResult:
    """HF; loop diuretic in [intime − 12 h, intime + 24 h] → first-day sodium < 135 (PR)."""
    return _diuretic(db, ADJ)


def diuretic_hf_crude(db: StudyDB) -> AnalysisResult:
    """Trap: no adjustment (sicker patients get fewer diuretics and more hyponatremia)."""
    return _diuretic(db, [])


# --- albumin / acute pancreatitis (cohort, logistic + AUC) ----------------------------------

def _albumin_sql(any_fluid: bool) -> str:
    item = ("le.itemid IN (SELECT itemid FROM {hosp}.d_labitems WHERE label = 'Albumin')"
            if any_fluid else "le.itemid = 50862")
    return f"""(SELECT min(le.valuenum) FROM {{hosp}}.labevents le
  WHERE le.hadm_id = b.hadm_id AND {item}
    AND le.charttime BETWEEN b.intime - interval '6 hours' AND b.intime + interval '24 hours'
  ) AS albumin_min"""


AKI_SQL = """COALESCE((SELECT max(k.aki_stage) FROM {derived}.kdigo_stages k
  WHERE k.stay_id = b.stay_id AND k.charttime <= b.intime + interval '7 days'), 0) AS aki_max"""


def _albumin(db: StudyDB, any_fluid: bool, adjust: list[str] = ADJ) -> AnalysisResult:
    df = stays(db, dx_flag("pancreatitis", ["5770"], ["K85"]), _albumin_sql(any_fluid), AKI_SQL,
               where=has_dx(["5770"], ["K85"]))
    df = adult_first(df[df["pancreatitis"]]).dropna(subset=["albumin_min"])
    df = df.assign(aki=(df["aki_max"] >= 1).astype(int),
                   low_albumin=(df["albumin_min"] < 3.0).astype(int),
                   albumin_drop=-df["albumin_min"])
    values = stats.logistic(df, "aki", ["low_albumin", *adjust])["low_albumin"].fields(
        "or_low_albumin", "p_low_albumin")
    values |= stats.logistic(df, "aki", ["albumin_drop", *adjust])["albumin_drop"].fields(
        "or_per_g")
    values["auc_albumin"] = stats.auc(df["aki"], df["albumin_drop"])
    return AnalysisResult(values, cohort_frame(df, ["age", "pancreatitis", "first_icu_stay",
                                                    "albumin_min"]))


def albumin_ap(db: StudyDB) -> AnalysisResult:
    """AP; first-day serum albumin (itemid 50862) < 3.0 g/dL → KDIGO AKI ≥ 1 within 7 days."""
    return _albumin(db, any_fluid=False)


def albumin_ap_any_fluid(db: StudyDB) -> AnalysisResult:
    """Trap: every lab item labelled 'Albumin' (includes ascitic fluid)."""
    return _albumin(db, any_fluid=True)


# --- glucose / intracerebral haemorrhage (cohort, Cox + log-rank) ---------------------------

def _glucose(db: StudyDB, exclude_traumatic: bool, adjust: list[str] = ADJ) -> AnalysisResult:
    df = stays(db, dx_flag("ich", ["431"], ["I61"]),
               dx_flag("traumatic", ["852"], ["S06"]),
               "(SELECT f.glucose_max FROM {derived}.first_day_lab f "
               "WHERE f.stay_id = b.stay_id) AS glucose_max", where=has_dx(["431"], ["I61"]))
    keep = df["ich"] & ~df["traumatic"] if exclude_traumatic else df["ich"]
    df = died_within(adult_first(df[keep]).dropna(subset=["glucose_max"]), 30)
    df = df.assign(hyperglycemia=(df["glucose_max"] >= 180).astype(int),
                   glucose_50=df["glucose_max"] / 50.0)
    values = {"n_cohort": float(len(df))}
    values |= stats.cox(df, "time_30d", "death_30d", ["hyperglycemia", *adjust])[
        "hyperglycemia"].fields("hr_glucose")
    values["p_logrank"] = stats.logrank_p(df, "time_30d", "death_30d", "hyperglycemia")
    values |= stats.cox(df, "time_30d", "death_30d", ["glucose_50", *adjust])["glucose_50"].fields(
        "hr_per_50")
    return AnalysisResult(values, cohort_frame(df, ["age", "ich", "traumatic",
                                                    "first_icu_stay"]))


def glucose_ich(db: StudyDB) -> AnalysisResult:
    """Non-traumatic ICH; first-day max glucose ≥ 180 mg/dL → 30-day death (Cox, log-rank)."""
    return _glucose(db, exclude_traumatic=True)


def glucose_ich_with_trauma(db: StudyDB) -> AnalysisResult:
    """Trap: traumatic ICH (852.x / S06.x) not excluded."""
    return _glucose(db, exclude_traumatic=False)


# --- PPI / influenza (negative control; logistic + modified Poisson) ------------------------

def _ppi(db: StudyDB, adjust: list[str], influenza_only: bool) -> AnalysisResult:
    df = stays(db, dx_flag("influenza", ["487", "488"], ["J09", "J10", "J11"]),
               drug_flag("ppi", ["pantoprazole", "omeprazole", "esomeprazole", "lansoprazole"],
                         -12, 24))
    df = adult_first(df[df["influenza"]] if influenza_only else df)
    df = df.assign(ppi=df["ppi"].astype(int), death=df["hospital_expire_flag"].astype(int))
    values = {"n_cohort": float(len(df))}
    values |= stats.logistic(df, "death", ["ppi", *adjust])["ppi"].fields("or_ppi", "p_ppi")
    values |= stats.poisson_robust(df, "death", ["ppi", *adjust])["ppi"].fields("rr_ppi")
    return AnalysisResult(values, cohort_frame(df, ["age", "influenza", "first_icu_stay"]))


def ppi_influenza(db: StudyDB) -> AnalysisResult:
    """Influenza, first ICU stay, age ≥ 18; PPI in [intime − 12 h, intime + 24 h] →
    in-hospital death (planted null)."""
    return _ppi(db, ADJ, influenza_only=True)


ANALYSES.add("lactate_hf", StudyAnalyses(reference=lactate_hf, traps={"crude": lactate_hf_crude},
                                         variants=variants(_lactate)))
ANALYSES.add("diuretic_hyponatremia_hf", StudyAnalyses(
    reference=diuretic_hf, traps={"crude": diuretic_hf_crude}, variants=variants(_diuretic)))
ANALYSES.add("albumin_ap", StudyAnalyses(
    reference=albumin_ap, traps={"any_albumin_item": albumin_ap_any_fluid},
    variants=variants(lambda db, adj: _albumin(db, False, adj))))
ANALYSES.add("glucose_ich", StudyAnalyses(
    reference=glucose_ich, traps={"traumatic_included": glucose_ich_with_trauma},
    variants=variants(lambda db, adj: _glucose(db, True, adj))))
ANALYSES.add("ppi_influenza_null", StudyAnalyses(reference=ppi_influenza, traps={
    "crude": lambda db: _ppi(db, [], influenza_only=True),
    "all_icu_stays": lambda db: _ppi(db, ADJ, influenza_only=False)},
    variants=variants(lambda db, adj: _ppi(db, adj, influenza_only=True))))
