"""What every RWE study analysis shares: the database handle, the result, the registry and the
cohort SQL helpers (the studies themselves: :mod:`tasks_lib.rwe.sepsis_analyses`,
:mod:`tasks_lib.rwe.non_sepsis_analyses`; every one registered: :mod:`tasks_lib.rwe.analyses`).

Each study has one *reference* analysis (what its protocol says, exactly) and one or more *trap*
analyses (a protocol violation: no adjustment, no exclusions, the wrong lab item or unit). Both
take a :class:`StudyDB` (SQLAlchemy URL or engine + schema names) and return an
:class:`AnalysisResult`: the field values by field id and the cohort it analysed (one row per
included stay: the protocol's id columns and criterion attributes). The honest scripted agent runs
the very same reference analysis through its sandboxed database role; construct runs it on the
freshly loaded database to produce the private reference answers, then runs the traps to check
that each flips at least one scored field (``../shared/specs/rwe.md`` §9.3).

Values are exact (unrounded); :func:`tasks_lib.rwe.types.publish_value` rounds them. P-values are
Wald (logistic/Poisson/Cox) or log-rank, two-sided.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import pandas as pd
from pydantic import Field
from sqlalchemy import Engine, create_engine
from sqlalchemy import text as sa_text

from evaluators.core import Frozen, Registry
from tasks_lib.rwe.types import SchemaNames


class StudyDB(NamedTuple):
    """Where a study database is: a SQLAlchemy URL (or an open engine) and its schema names."""

    url: str | Engine
    schemas: SchemaNames = SchemaNames()

    def engine(self) -> Engine:
        """An engine for :attr:`url` (the given engine itself when one was passed)."""
        return self.url if isinstance(self.url, Engine) else create_engine(self.url)

    def query(self, sql: str) -> pd.DataFrame:
        """Run ``sql`` with ``{hosp}``, ``{icu}``, ``{derived}`` replaced by the schema names."""
        text = sql.format(hosp=self.schemas.hosp, icu=self.schemas.icu,
                          derived=self.schemas.derived)
        engine = self.engine()
        try:
            with engine.connect() as conn:
                return pd.read_sql_query(sa_text(text), conn)
        finally:
            if not isinstance(self.url, Engine):
                engine.dispose()


class AnalysisResult(NamedTuple):
    """What an analysis produced."""

    values: dict[str, float]
    """Field id → exact value (ratios, CI bounds, p-values, counts, percents, AUCs)."""
    cohort: pd.DataFrame
    """The analysed cohort: the contract's id columns and attributes, one row per stay."""


Analysis = Callable[[StudyDB], AnalysisResult]
"""A reference or trap analysis."""


class StudyAnalyses(Frozen):
    """A study's reference analysis and its trap panel."""

    reference: Analysis = Field(description="The protocol-faithful analysis (gold).")
    traps: dict[str, Analysis] = Field(
        min_length=1, description="Trap name (the protocol violation) → analysis; each must "
        "flip at least one scored field of the gold.")
    variants: dict[str, Analysis] = Field(
        default_factory=dict, description="Other valid analyses (another adjustment set); each "
        "should agree with the gold on every scored field (recorded, reported by the audit).")


ANALYSES: Registry[StudyAnalyses] = Registry("rwe analysis")
"""Study analysis name (``analysis:`` in ``study.yaml``) → its analyses."""


def run_reference(name: str, db: StudyDB) -> AnalysisResult:
    """Run the reference analysis registered as ``name`` on ``db``."""
    return ANALYSES.get(name).reference(db)


def run_traps(name: str, db: StudyDB) -> dict[str, AnalysisResult]:
    """Run every trap analysis of ``name`` on ``db`` (trap name → result)."""
    return {trap: fn(db) for trap, fn in ANALYSES.get(name).traps.items()}


BASE_SQL = """
SELECT d.subject_id, d.hadm_id, d.stay_id, d.admission_age AS age, d.first_icu_stay,
       d.los_icu::float AS los_icu_days, d.icu_intime AS intime, d.hospital_expire_flag,
       s.sofa, s.sofa * s.sofa AS sofa_sq, (d.gender = 'F')::int AS female,
       d.dod - d.icu_intime::date AS days_to_death,
       COALESCE((SELECT bool_or(x.sepsis3) FROM {derived}.sepsis3 x
                 WHERE x.stay_id = d.stay_id), false) AS sepsis3
FROM {derived}.icustay_detail d
JOIN {derived}.first_day_sofa s ON s.stay_id = d.stay_id
"""
"""Every ICU stay with age, first-stay flag, ICU LOS, SOFA, Sepsis-3 and days to death."""


def has_dx(icd9: list[str], icd10: list[str]) -> str:
    """SQL condition: the admission (alias ``b``) has a code starting with one of the
    ICD-9 or ICD-10 prefixes."""
    conds = [f"(dx.icd_version = 9 AND dx.icd_code LIKE '{c}%')" for c in icd9]
    conds += [f"(dx.icd_version = 10 AND dx.icd_code LIKE '{c}%')" for c in icd10]
    return (f"EXISTS (SELECT 1 FROM {{hosp}}.diagnoses_icd dx WHERE dx.hadm_id = b.hadm_id "
            f"AND ({' OR '.join(conds)}))")


def dx_flag(name: str, icd9: list[str], icd10: list[str]) -> str:
    """SQL column ``name``: :func:`has_dx`."""
    return f"{has_dx(icd9, icd10)} AS {name}"


def drug_flag(name: str, drugs: list[str], from_h: int, to_h: int) -> str:
    """SQL column: a prescription whose drug matches one of ``drugs`` (ILIKE) started within
    [intime + from_h, intime + to_h] hours."""
    like = " OR ".join(f"p.drug ILIKE '%{d}%'" for d in drugs)
    return (f"EXISTS (SELECT 1 FROM {{hosp}}.prescriptions p WHERE p.hadm_id = b.hadm_id "
            f"AND ({like}) AND p.starttime BETWEEN b.intime + interval '{from_h} hours' "
            f"AND b.intime + interval '{to_h} hours') AS {name}")


def stays(db: StudyDB, *columns: str, where: str = "true") -> pd.DataFrame:
    """:data:`BASE_SQL` rows satisfying ``where`` plus extra computed ``columns`` (SQL over
    alias ``b``)."""
    extra = "".join(f", {c}" for c in columns)
    return db.query(f"SELECT b.*{extra} FROM ({BASE_SQL}) b WHERE {where}")


def adult_first(df: pd.DataFrame) -> pd.DataFrame:
    """First ICU stay of the admission, age ≥ 18."""
    return df[df["first_icu_stay"] & (df["age"] >= 18)]


def died_within(df: pd.DataFrame, days: int) -> pd.DataFrame:
    """Add ``death_{days}d`` (0/1) and ``time_{days}d`` (days from ICU admission date to death,
    censored at ``days``; a same-day death counts 0.5 days)."""
    d = df["days_to_death"]
    event = d.notna() & (d <= days)
    out = df.copy()
    out[f"death_{days}d"] = event.astype(int)
    out[f"time_{days}d"] = d.where(event, days).clip(lower=0.5).astype(float)
    return out


VARIANT_ADJUSTMENTS = {"plus_sex": ["age", "sofa", "female"],
                       "sofa_quadratic": ["age", "sofa", "sofa_sq"],
                       "sex_and_sofa_quadratic": ["age", "sofa", "sofa_sq", "female"]}
"""Variant panel: other valid adjustment sets (the protocol's age + SOFA, plus more)."""


def variants(fn: Callable[[StudyDB, list[str]], AnalysisResult]) -> dict[str, Analysis]:
    """The variant panel of an analysis parameterised by its adjustment set."""
    return {name: partial(_with_adjustment, fn, adj) for name, adj in VARIANT_ADJUSTMENTS.items()}


def _with_adjustment(fn: Callable[[StudyDB, list[str]], AnalysisResult], adjust: list[str],
                     db: StudyDB) -> AnalysisResult:
    return fn(db, adjust)


def cohort_frame(df: pd.DataFrame, attributes: list[str]) -> pd.DataFrame:
    """The cohort audit table: subject_id, hadm_id, stay_id and ``attributes``."""
    return df[["subject_id", "hadm_id", "stay_id", *attributes]].sort_values(
        "stay_id", ignore_index=True)

