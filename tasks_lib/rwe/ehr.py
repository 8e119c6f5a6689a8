"""Synthetic EHR generator: MIMIC-IV names and shapes, seeded, vectorised, with planted effects.

``generate(seed, n_patients)`` returns every table of the study database as a DataFrame keyed by
schema-qualified name (``mimiciv_hosp.patients`` …), in a canonical row order, so the same seed
gives byte-identical CSVs (:func:`table_csvs`; the EHR's hash is the shared
:func:`tasks_lib.pool_format.content_hash` of them). Ids are in MIMIC's ranges
(subject 10M–19.99M, hadm 20M–29.99M, stay 30M–39.99M); years are shifted (anchor_year
2110–2208) with ``anchor_year_group`` giving the real period; a stay whose hidden real date is
before 2015-10-01 is coded in ICD-9, otherwise ICD-10.

Population: every patient belongs to one template (:data:`tasks_lib.rwe.templates.TEMPLATES`,
one index ICU stay with 0–2 earlier admissions without ICU) or to the background (1–3 admissions
without ICU). The ICU event tables (chartevents, inputevents, outputevents, d_items,
microbiologyevents, blood gases) are added in :mod:`tasks_lib.rwe.icu_tables`, the derived tables
computed from the base tables in :mod:`tasks_lib.rwe.derived`.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from tasks_lib.rwe import derived, events, icu_tables, load, rows
from tasks_lib.rwe.templates import TEMPLATES, Overlay

GROUPS = ["2008 - 2010", "2011 - 2013", "2014 - 2016", "2017 - 2019"]
CAREUNIT = {"sepsis": "Medical Intensive Care Unit (MICU)",
            "heart_failure": "Coronary Care Unit (CCU)",
            "pancreatitis": "Surgical Intensive Care Unit (SICU)",
            "ich": "Neuro Surgical Intensive Care Unit (Neuro SICU)",
            "traumatic_ich": "Trauma SICU (TSICU)",
            "influenza": "Medical Intensive Care Unit (MICU)",
            "background_icu": "Medical/Surgical Intensive Care Unit (MICU/SICU)"}
DAY_S = 86_400


class EHR(NamedTuple):
    """A generated database: table name → frame, plus the hidden per-stay truth."""

    tables: dict[str, pd.DataFrame]
    """Schema-qualified table name → rows (column names as mimic-code's create.sql)."""
    truth: pd.DataFrame
    """Per index stay: template and latent variables (never loaded into the database)."""


def _ids(rng: np.random.Generator, base: int, n: int) -> NDArray[Any]:
    return np.asarray(base + np.sort(rng.choice(9_990_000, n, replace=False)), dtype=np.int64)


def _year_start(years: NDArray[Any]) -> NDArray[Any]:
    return np.asarray((years - 1970).astype("datetime64[Y]").astype("datetime64[s]"))


def _patients(rng: np.random.Generator, n: int) -> pd.DataFrame:
    shares = [share for share, _ in TEMPLATES.values()]
    names = [*TEMPLATES, "background"]
    template = rng.choice(names, size=n, p=[*shares, 1.0 - sum(shares)])
    group = rng.integers(0, 4, n)
    return pd.DataFrame({
        "subject_id": _ids(rng, 10_000_000, n), "template": template,
        "gender": np.where(rng.random(n) < 0.45, "F", "M"),
        "anchor_year": rng.integers(2110, 2206, n), "group": group,
        "real_anchor": 2008 + 3 * group + rng.integers(0, 3, n),
        "delta": rng.integers(0, 3, n),
        "age": np.clip(np.round(rng.normal(58, 18, n)), 18, 91)}).pipe(
            lambda p: p.assign(delta=np.minimum(p["delta"], p["age"] - 18).astype(np.int64)))


def _index_stays(rng: np.random.Generator,
                 pats: pd.DataFrame) -> tuple[pd.DataFrame, list[Overlay]]:
    """One index ICU stay per template patient, with the template's overlay columns."""
    frames: list[pd.DataFrame] = []
    overlays: list[Overlay] = []
    for i, (name, (_, fn)) in enumerate(TEMPLATES.items()):
        sub = pats[pats["template"] == name].reset_index(drop=True)
        ov = fn(rng, len(sub))
        st = pd.concat([sub[["subject_id", "template", "anchor_year", "real_anchor", "delta",
                             "group"]], ov.stays], axis=1)
        frames.append(st.assign(pos=np.arange(len(sub)), overlay_idx=i))
        overlays.append(ov)
    return pd.concat(frames, ignore_index=True), overlays


def generate(seed: int, n_patients: int) -> EHR:
    """Generate the whole database for ``seed`` (same seed and size ⇒ same tables)."""
    rng = np.random.default_rng(seed)
    pats = _patients(rng, n_patients)
    stays, overlays = _index_stays(rng, pats)
    stays = _admission_times(rng, stays)
    pats["age"] = pats["subject_id"].map(stays.set_index("subject_id")["age"]).fillna(pats["age"])
    adm = events.admissions(rng, pats, stays)
    stays["stay_id"] = rng.permutation(_ids(rng, 30_000_000, len(stays)))
    ev = events.stay_events(rng, stays, overlays)
    tables = {"mimiciv_hosp.patients": events.patients(pats, stays),
              "mimiciv_icu.icustays": events.icustays(stays, CAREUNIT)}
    tables.update(rows.hosp_tables(rng, adm, ev))
    icu_tables.add(rng, tables, stays)
    tables.update(derived.derived_tables(rng, tables, stays))
    return EHR(tables, stays)


def _admission_times(rng: np.random.Generator, stays: pd.DataFrame) -> pd.DataFrame:
    """Admission/ICU/discharge/death times of the index stays (deaths truncate the stay)."""
    n = len(stays)
    delta = np.where(stays["age"] - stays["delta"] < 18, 0, stays["delta"]).astype(np.int64)
    stays["delta"] = delta
    year = stays["anchor_year"].to_numpy() + delta
    admit = _year_start(year) + (rng.uniform(0, 364, n) * DAY_S).astype("timedelta64[s]")
    day_of_year = (admit - _year_start(year)).astype("timedelta64[D]").astype(np.int64)
    real_year = stays["real_anchor"].to_numpy() + delta
    stays["icd10"] = (real_year > 2015) | ((real_year == 2015) & (day_of_year >= 273))
    intime = admit + (rng.uniform(1, 10, n) * 3600).astype("timedelta64[s]")
    t_death = stays["t_death"].to_numpy()
    los = np.fmin(stays["los_icu"].to_numpy(), t_death)
    outtime = intime + (los * DAY_S).astype("timedelta64[s]")
    disch = outtime + (stays["post_icu"].to_numpy() * DAY_S).astype("timedelta64[s]")
    death_at = intime + (np.nan_to_num(t_death, nan=0.0) * DAY_S).astype("timedelta64[s]")
    in_hosp = ~np.isnan(t_death) & (death_at <= disch)
    stays["admittime"], stays["intime"], stays["outtime"] = admit, intime, outtime
    stays["dischtime"] = np.where(in_hosp, death_at, disch)
    stays["deathtime"] = pd.Series(death_at).where(in_hosp).to_numpy()
    stays["dod"] = pd.Series(death_at).where(~np.isnan(t_death)).dt.normalize().to_numpy()
    stays["expire"] = in_hosp.astype(np.int64)
    return stays


def table_csvs(ehr: EHR) -> dict[str, bytes]:
    """Canonical CSV bytes of every table (what COPY loads and the content hash covers)."""
    return {name: load.table_csv(df, name) for name, df in ehr.tables.items()}


def table_hashes(csvs: dict[str, bytes]) -> dict[str, str]:
    """sha256 of each table's canonical CSV."""
    return {name: hashlib.sha256(data).hexdigest() for name, data in csvs.items()}
