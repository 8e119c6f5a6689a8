"""Base tables of the synthetic EHR from the index stays and template overlays (hosp + icu).

Turns per-stay latent columns and positional overlay events (offsets in hours from ICU
admission) into MIMIC-IV rows: patients, admissions (index + earlier + background admissions),
icustays, labevents, prescriptions, diagnoses_icd, procedures_icd and the dictionaries.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from tasks_lib.rwe import vocab
from tasks_lib.rwe.templates import Overlay

Rng = np.random.Generator
DAY_S = 86_400
HOUR = np.timedelta64(3600, "s")
GROUPS = ["2008 - 2010", "2011 - 2013", "2014 - 2016", "2017 - 2019"]


class Events(NamedTuple):
    """Events with absolute times, keyed by subject and admission."""

    labs: pd.DataFrame
    """subject_id, hadm_id, item, charttime, valuenum."""
    drugs: pd.DataFrame
    """subject_id, hadm_id, cls, starttime."""
    dx: pd.DataFrame
    """subject_id, hadm_id, icd10, concept (``vocab.DIAGNOSES`` key or ``bg:<i>``)."""


def _secs(days: NDArray[Any]) -> NDArray[Any]:
    return np.asarray((np.asarray(days) * DAY_S).astype("timedelta64[s]"))


def _year_start(years: NDArray[Any]) -> NDArray[Any]:
    return np.asarray((np.asarray(years) - 1970).astype("datetime64[Y]").astype("datetime64[s]"))


def _pick(rng: Rng, options: list[str], n: int, p: list[float] | None = None) -> NDArray[Any]:
    return np.asarray(rng.choice(options, size=n, p=p))


def patients(pats: pd.DataFrame, stays: pd.DataFrame) -> pd.DataFrame:
    """``mimiciv_hosp.patients`` (dod from the index stays; background patients survive)."""
    st = stays.set_index("subject_id")
    delta = pats["subject_id"].map(st["delta"]).fillna(pats["delta"]).astype(np.int64)
    dod = pats["subject_id"].map(st["dod"])
    return pd.DataFrame({
        "subject_id": pats["subject_id"], "gender": pats["gender"],
        "anchor_age": (pats["age"] - delta).astype(np.int64),
        "anchor_year": pats["anchor_year"],
        "anchor_year_group": np.asarray(GROUPS)[pats["group"].to_numpy()],
        "dod": pd.to_datetime(dod).dt.strftime("%Y-%m-%d")}).reset_index(drop=True)


def admissions(rng: Rng, pats: pd.DataFrame, stays: pd.DataFrame) -> pd.DataFrame:
    """All admissions with internal columns ``icd10`` and ``index_stay`` (dropped on output);
    sets ``stays['hadm_id']``."""
    idx = pd.DataFrame({"subject_id": stays["subject_id"], "admittime": stays["admittime"],
                        "dischtime": stays["dischtime"], "deathtime": stays["deathtime"],
                        "expire": stays["expire"], "icd10": stays["icd10"],
                        "index_stay": True})
    n_prior = rng.integers(0, 3, len(stays))
    rep = stays.loc[stays.index.repeat(n_prior)]
    k = np.concatenate([np.arange(1, m + 1) for m in n_prior]) if len(rep) else np.zeros(0)
    back = _secs(rng.uniform(60, 400, len(rep)) * k)
    prior = _other(rng, rep["subject_id"].to_numpy(), rep["admittime"].to_numpy() - back,
                   rep["real_anchor"].to_numpy(), rep["anchor_year"].to_numpy())
    bg = pats[pats["template"] == "background"]
    n_bg = rng.integers(1, 4, len(bg))
    rep_bg = bg.loc[bg.index.repeat(n_bg)]
    first = _year_start(rep_bg["anchor_year"].to_numpy() + rep_bg["delta"].to_numpy())
    kb = np.concatenate([np.arange(m) for m in n_bg]) if len(rep_bg) else np.zeros(0)
    start = first + _secs(rng.uniform(0, 200, len(rep_bg)) + kb * rng.uniform(220, 400,
                                                                             len(rep_bg)))
    later = _other(rng, rep_bg["subject_id"].to_numpy(), start, rep_bg["real_anchor"].to_numpy(),
                   rep_bg["anchor_year"].to_numpy())
    adm = pd.concat([idx, prior, later], ignore_index=True)
    ids = 20_000_000 + np.sort(rng.choice(9_990_000, len(adm), replace=False))
    adm["hadm_id"] = rng.permutation(ids)
    stays["hadm_id"] = adm["hadm_id"].to_numpy()[: len(stays)]
    return _admission_columns(rng, adm).sort_values(["subject_id", "admittime"],
                                                    ignore_index=True)


def _other(rng: Rng, subject: NDArray[Any], admit: NDArray[Any], real_anchor: NDArray[Any],
           anchor_year: NDArray[Any]) -> pd.DataFrame:
    """Admissions without ICU stay (survived, 1–7 days)."""
    admit = np.asarray(admit).astype("datetime64[s]")
    years = admit.astype("datetime64[Y]").astype(np.int64) + 1970
    real = real_anchor + (years - anchor_year)
    return pd.DataFrame({"subject_id": subject, "admittime": admit,
                         "dischtime": admit + _secs(rng.uniform(1, 7, len(subject))),
                         "deathtime": np.full(len(subject), np.datetime64("NaT"), "datetime64[s]"),
                         "expire": 0, "icd10": real >= 2016, "index_stay": False})


def _admission_columns(rng: Rng, adm: pd.DataFrame) -> pd.DataFrame:
    n = len(adm)
    emer = adm["index_stay"].to_numpy() | (rng.random(n) < 0.5)
    adm["admission_type"] = np.where(
        emer, _pick(rng, ["EW EMER.", "URGENT", "DIRECT EMER."], n, [0.7, 0.2, 0.1]),
        _pick(rng, ["ELECTIVE", "OBSERVATION ADMIT", "SURGICAL SAME DAY ADMISSION"], n))
    adm["admit_provider_id"] = np.char.add("P", rng.integers(10000, 99999, n).astype(str))
    adm["admission_location"] = np.where(
        emer, "EMERGENCY ROOM", _pick(rng, ["PHYSICIAN REFERRAL", "TRANSFER FROM HOSPITAL"], n))
    adm["discharge_location"] = np.where(
        adm["expire"] == 1, "DIED",
        _pick(rng, ["HOME", "HOME HEALTH CARE", "SKILLED NURSING FACILITY", "REHAB"], n))
    adm["insurance"] = _pick(rng, ["Medicare", "Medicaid", "Other"], n, [0.45, 0.15, 0.4])
    adm["language"] = _pick(rng, ["ENGLISH", "?"], n, [0.9, 0.1])
    adm["marital_status"] = _pick(rng, ["MARRIED", "SINGLE", "WIDOWED", "DIVORCED"], n)
    adm["race"] = _pick(rng, ["WHITE", "BLACK/AFRICAN AMERICAN", "HISPANIC/LATINO - PUERTO RICAN",
                              "ASIAN", "OTHER", "UNKNOWN"], n, [0.6, 0.15, 0.05, 0.05, 0.1, 0.05])
    ed = emer & (adm["admission_type"] == "EW EMER.").to_numpy()
    edreg = adm["admittime"].to_numpy() - _secs(rng.uniform(2, 8, n) / 24)
    adm["edregtime"] = pd.Series(edreg).where(ed).to_numpy()
    adm["edouttime"] = adm["admittime"].where(ed)
    adm["hospital_expire_flag"] = adm["expire"].astype(np.int64)
    return adm


ADMISSION_COLUMNS = ["subject_id", "hadm_id", "admittime", "dischtime", "deathtime",
                     "admission_type", "admit_provider_id", "admission_location",
                     "discharge_location", "insurance", "language", "marital_status", "race",
                     "edregtime", "edouttime", "hospital_expire_flag"]


def icustays(stays: pd.DataFrame, careunit: dict[str, str]) -> pd.DataFrame:
    """``mimiciv_icu.icustays`` (one stay per index admission)."""
    unit = stays["template"].map(careunit)
    los = (stays["outtime"] - stays["intime"]).dt.total_seconds() / DAY_S
    return pd.DataFrame({"subject_id": stays["subject_id"], "hadm_id": stays["hadm_id"],
                         "stay_id": stays["stay_id"], "first_careunit": unit,
                         "last_careunit": unit, "intime": stays["intime"],
                         "outtime": stays["outtime"], "los": los.round(4)}
                        ).sort_values("stay_id", ignore_index=True)


def _panel(rng: Rng, n: int, sofa: NDArray[Any], items: list[str]) -> pd.DataFrame:
    """The background lab panel of ``n`` stays: each item once in the first-day window and
    once on day 3; values around the reference range, worse with SOFA (sodium not: a share of
    its mid-range would reach 220 mEq/L, which mimic-code's chemistry concept drops as
    implausible), positive (mimic-code drops values ≤ 0)."""
    slots = [(-5.0, 20.0), (48.0, 72.0)]
    rows = np.tile(np.arange(n), len(items) * len(slots))
    item = np.repeat(items, len(slots) * n)
    slot = np.tile(np.repeat(np.arange(len(slots)), n), len(items))
    lo, hi = np.array([s[0] for s in slots])[slot], np.array([s[1] for s in slots])[slot]
    lab = [vocab.LABS[i] for i in items]
    per = np.repeat(np.arange(len(items)), len(slots) * n)
    low = np.array([x.low for x in lab])[per]
    high = np.array([x.high for x in lab])[per]
    sign = np.select([item == "platelets", item == "sodium"], [-1.0, 0.0], 1.0)
    worse = (1 + 0.06 * sofa[rows]) ** sign
    val = (low + high) / 2 * worse + rng.normal(0, 1, len(rows)) * (high - low) / 2 * 0.6
    return pd.DataFrame({"row": rows, "item": item, "offset_h": rng.uniform(lo, hi),
                         "valuenum": np.round(np.clip(val, np.maximum(low * 0.3, 0.01), None),
                                              2)})


def stay_events(rng: Rng, stays: pd.DataFrame, overlays: list[Overlay]) -> Events:
    """Overlay events of every index stay plus the background panel, drugs and codes."""
    labs, drugs, dx = [], [], []
    for i, ov in enumerate(overlays):
        st = stays[stays["overlay_idx"] == i].sort_values("pos")
        ids = st[["subject_id", "hadm_id", "intime", "icd10", "sofa"]].reset_index(drop=True)
        if len(ov.labs):
            labs.append(_at(ids, ov.labs, "offset_h", "charttime"))
        if len(ov.drugs):
            drugs.append(_at(ids, ov.drugs, "offset_h", "starttime"))
        if len(ov.dx):
            dx.append(_at(ids, ov.dx, None, None))
        items = [i for i in vocab.BACKGROUND_LABS if i not in ov.replaced_labs]
        labs.append(_at(ids, _panel(rng, len(ids), ids["sofa"].to_numpy(), items),
                        "offset_h", "charttime"))
    return Events(pd.concat(labs, ignore_index=True), pd.concat(drugs, ignore_index=True),
                  pd.concat(dx, ignore_index=True))


def _at(ids: pd.DataFrame, frame: pd.DataFrame, offset: str | None,
        out: str | None) -> pd.DataFrame:
    """Attach subject/hadm ids (and absolute times) to positional overlay rows."""
    rows = frame["row"].to_numpy()
    res = frame.drop(columns=["row"]).reset_index(drop=True)
    res["subject_id"] = ids["subject_id"].to_numpy()[rows]
    res["hadm_id"] = ids["hadm_id"].to_numpy()[rows]
    res["icd10"] = ids["icd10"].to_numpy()[rows]
    if offset is not None and out is not None:
        secs = (frame[offset].to_numpy() * 3600).astype("timedelta64[s]")
        res[out] = ids["intime"].to_numpy()[rows] + secs
        res = res.drop(columns=[offset])
    return res
