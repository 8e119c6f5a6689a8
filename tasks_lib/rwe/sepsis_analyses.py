"""Reference and trap analyses of the sepsis studies: statin use (cohort and case-control) and
the neutrophil-lymphocyte ratio in hypertensive sepsis (registered in ``ANALYSES``).

Each reference follows its protocol (``datasets/rwe/<study_id>/protocol.md``) step by step; each
trap breaks exactly one protocol rule. Field ids match the cards' ``study.yaml``.
"""

from __future__ import annotations

import numpy as np
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

STATINS = ["atorvastatin", "simvastatin", "rosuvastatin", "pravastatin"]
PPIS = ["pantoprazole", "omeprazole", "esomeprazole", "lansoprazole"]
LOOPS = ["furosemide", "bumetanide", "torsemide"]
ADJ = ["age", "sofa"]


# --- statin / sepsis (cohort: logistic + Cox; case-control variant) -------------------------

def _sepsis_stays(db: StudyDB) -> pd.DataFrame:
    df = stays(db, drug_flag("statin", STATINS, -24, 24), where="b.sepsis3")
    df = adult_first(df[df["sepsis3"]])
    return died_within(df, 28).assign(statin=lambda d: d["statin"].astype(int))


def _statin(df: pd.DataFrame, adjust: list[str]) -> AnalysisResult:
    values = {"n_cohort": float(len(df))}
    values |= stats.logistic(df, "death_28d", ["statin", *adjust])["statin"].fields(
        "or_statin", "p_statin")
    values |= stats.cox(df, "time_28d", "death_28d", ["statin", *adjust])["statin"].fields(
        "hr_statin")
    return AnalysisResult(values, cohort_frame(df, ["age", "sepsis3", "los_icu_days",
                                                    "first_icu_stay"]))


def statin_sepsis(db: StudyDB) -> AnalysisResult:
    """Sepsis-3, first ICU stay, age ≥ 18, ICU LOS ≥ 1 day; statin ±24 h → 28-day death."""
    df = _sepsis_stays(db)
    return _statin(df[df["los_icu_days"] >= 1.0], ADJ)


def statin_sepsis_crude(db: StudyDB) -> AnalysisResult:
    """Trap: no adjustment for age and SOFA."""
    df = _sepsis_stays(db)
    return _statin(df[df["los_icu_days"] >= 1.0], [])


def statin_sepsis_all_los(db: StudyDB) -> AnalysisResult:
    """Trap: ICU stays shorter than 24 h not excluded."""
    return _statin(_sepsis_stays(db), ADJ)


def _case_control(df: pd.DataFrame, adjust: list[str]) -> AnalysisResult:
    df = df.assign(case=df["hospital_expire_flag"].astype(int),
                   sofa_high=(df["sofa"] >= 8).astype(int))
    values = {"n_cases": float(df["case"].sum())}
    values |= stats.logistic(df, "case", ["statin", *adjust])["statin"].fields(
        "or_statin", "p_statin")
    values |= stats.logistic(df, "case", ["sofa_high", "age", "statin"])["sofa_high"].fields(
        "or_sofa8")
    return AnalysisResult(values, cohort_frame(df, ["age", "sepsis3", "los_icu_days",
                                                    "first_icu_stay", "case"]))


def statin_cc(db: StudyDB) -> AnalysisResult:
    """Cases = in-hospital deaths, controls = survivors; statin OR adjusted for age, SOFA."""
    df = _sepsis_stays(db)
    return _case_control(df[df["los_icu_days"] >= 1.0], ["age", "sofa"])


def statin_cc_crude(db: StudyDB) -> AnalysisResult:
    """Trap: unadjusted statin OR."""
    df = _sepsis_stays(db)
    return _case_control(df[df["los_icu_days"] >= 1.0], [])


# --- NLR / sepsis with hypertension (cohort, Cox) -------------------------------------------

NLR_SQL = """(SELECT n.valuenum / NULLIF(l.valuenum, 0)
  FROM {hosp}.labevents n JOIN {hosp}.labevents l
    ON l.hadm_id = n.hadm_id AND l.charttime = n.charttime AND l.itemid = 51244
  WHERE n.hadm_id = b.hadm_id AND n.itemid = 51256
    AND n.charttime BETWEEN b.intime - interval '6 hours' AND b.intime + interval '24 hours'
  ORDER BY n.charttime LIMIT 1) AS nlr"""


def _nlr(db: StudyDB, adjust: list[str]) -> AnalysisResult:
    df = stays(db, NLR_SQL, dx_flag("hypertension", ["401"], ["I10"]),
               where=f"b.sepsis3 AND {has_dx(['401'], ['I10'])}")
    df = adult_first(df[df["los_icu_days"] >= 1.0]).dropna(subset=["nlr"])
    df = died_within(df, 90)
    q = pd.qcut(df["nlr"], 4, labels=False)
    df = df.assign(q2=(q == 1).astype(int), q3=(q == 2).astype(int), q4=(q == 3).astype(int),
                   ln_nlr=np.log(df["nlr"]))
    values = {"n_cohort": float(len(df))}
    values |= stats.cox(df, "time_90d", "death_90d", ["q2", "q3", "q4", *adjust])["q4"].fields(
        "hr_q4", "p_q4")
    values |= stats.cox(df, "time_90d", "death_90d", ["ln_nlr", *adjust])["ln_nlr"].fields(
        "hr_ln_nlr")
    return AnalysisResult(values, cohort_frame(df, ["age", "sepsis3", "hypertension",
                                                    "first_icu_stay", "los_icu_days", "nlr"]))


def nlr_sepsis_htn(db: StudyDB) -> AnalysisResult:
    """Sepsis-3 + hypertension, ICU LOS ≥ 1 day; first-day NLR (51256/51244) quartile →
    90-day death (Cox)."""
    return _nlr(db, ADJ)


def nlr_crude(db: StudyDB) -> AnalysisResult:
    """Trap: no adjustment (NLR falls with age, so the crude HR flips)."""
    return _nlr(db, [])


def _statin_adjusted(db: StudyDB, adjust: list[str]) -> AnalysisResult:
    df = _sepsis_stays(db)
    return _statin(df[df["los_icu_days"] >= 1.0], adjust)


def _cc_adjusted(db: StudyDB, adjust: list[str]) -> AnalysisResult:
    df = _sepsis_stays(db)
    return _case_control(df[df["los_icu_days"] >= 1.0], adjust)


ANALYSES.add("statin_sepsis", StudyAnalyses(
    reference=statin_sepsis, traps={"crude": statin_sepsis_crude,
                                    "no_los_exclusion": statin_sepsis_all_los},
    variants=variants(_statin_adjusted)))
ANALYSES.add("statin_sepsis_cc", StudyAnalyses(reference=statin_cc,
                                               traps={"crude": statin_cc_crude},
                                               variants=variants(_cc_adjusted)))
ANALYSES.add("nlr_sepsis_htn", StudyAnalyses(reference=nlr_sepsis_htn,
                                             traps={"crude": nlr_crude}, variants=variants(_nlr)))
