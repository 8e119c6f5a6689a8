"""The ICU event tables of the synthetic EHR, written so that mimic-code's concept SQL scores each
stay's planted SOFA components (:mod:`tasks_lib.rwe.icu_plan`) and Sepsis-3 flag.

Per ICU stay, inside the first day (and inside the stay: some last minutes), a few rows each:

* ``chartevents``: heart rate at ICU in- and out-time (``icustay_times``, so the hourly SOFA has
  its hours), two mean arterial pressures (cardiovascular 1: one below 70 mmHg), one GCS
  (eye/verbal/motor summing into the CNS band), and for respiration 3–4 two ventilator-mode rows
  ('CMV/ASSIST', InvasiveVent in ``ventilation``) around the blood gas;
* ``labevents``: one arterial blood gas (specimen 'ART.', pO2, FiO2 in one specimen) whose
  PaO2/FiO2 falls in the respiration band;
* ``inputevents``: cardiovascular 2 dobutamine, 3 norepinephrine ≤ 0.1, 4 norepinephrine
  > 0.1 mcg/kg/min (mimic-code's rule: any norepinephrine ≤ 0.1 scores 3);
* ``outputevents``: three Foley volumes whose first-day sum is < 200 / < 500 mL when renal comes
  from urine output, 800–2,400 mL otherwise; no weight is charted, so ``kdigo_uo``'s rates are
  NULL and KDIGO stages come from creatinine alone, as the planted AKI;
* Sepsis-3 stays: a blood culture after their first antibiotic given in the ICU (a repeat dose
  early in the stay when the planted antibiotic was given before ICU admission, which
  mimic-code's ``antibiotic`` leaves without a stay), so ``suspicion_of_infection`` finds it.
  Other stays' antibiotics have no culture: no suspected infection, no ``sepsis3`` row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

Rng = np.random.Generator
H = np.timedelta64(3600, "s")
D_ITEMS = [
    (220045, "Heart Rate", "HR", "chartevents", "Routine Vital Signs", "bpm", "Numeric"),
    (220181, "Non Invasive Blood Pressure mean", "NBPm", "chartevents", "Routine Vital Signs",
     "mmHg", "Numeric"),
    (220739, "GCS - Eye Opening", "GCS - Eye Opening", "chartevents", "Neurological", None,
     "Text"),
    (223900, "GCS - Verbal Response", "GCS - Verbal Response", "chartevents", "Neurological",
     None, "Text"),
    (223901, "GCS - Motor Response", "GCS - Motor Response", "chartevents", "Neurological",
     None, "Text"),
    (223849, "Ventilator Mode", "Ventilator Mode", "chartevents", "Respiratory", None, "Text"),
    (221289, "Epinephrine", "Epinephrine", "inputevents", "Medications", "mg", "Solution"),
    (221653, "Dobutamine", "Dobutamine", "inputevents", "Medications", "mg", "Solution"),
    (221662, "Dopamine", "Dopamine", "inputevents", "Medications", "mg", "Solution"),
    (221906, "Norepinephrine", "Norepinephrine", "inputevents", "Medications", "mg",
     "Solution"),
    (226559, "Foley", "Foley", "outputevents", "Output", "mL", "Numeric"),
]
"""``d_items`` rows of the items written (itemids as mimic-code's concept SQL names them)."""
BG_LABS = [(52033, "Specimen Type", "Blood", "Blood Gas"), (50816, "Oxygen", "Blood", "Blood Gas"),
           (50821, "pO2", "Blood", "Blood Gas")]
"""``d_labitems`` rows of the blood-gas items."""
EYES = ["No Response", "To Pain", "To Speech", "Spontaneously"]
VERBAL = ["No Response", "Incomprehensible sounds", "Inappropriate Words", "Confused",
          "Oriented"]
MOTOR = ["No response", "Abnormal extension", "Abnormal Flexion", "Flex-withdraws",
         "Localizes Pain", "Obeys Commands"]
GCS_BANDS = [(15, 15), (13, 14), (10, 12), (6, 9), (3, 5)]
PF_BANDS = [(420, 520, 21), (310, 390, 40), (210, 290, 40), (110, 190, 60), (55, 95, 80)]
"""Respiration 0–4 → PaO2/FiO2 range and the FiO2 (%) charted with it."""
UO_BANDS = {0: (800, 2400), 3: (230, 470), 4: (60, 180)}


def _uniform(rng: Rng, lo: NDArray[Any] | float, hi: NDArray[Any] | float,
             n: int) -> NDArray[Any]:
    return np.asarray(rng.uniform(lo, hi, n))


def _at(base: NDArray[Any], hours: NDArray[Any]) -> NDArray[Any]:
    return np.asarray(base + (np.asarray(hours) * 3600).astype("timedelta64[s]"))


def _chart(st: pd.DataFrame, rows: NDArray[Any], hours: NDArray[Any], itemid: int,
           value: Any, valuenum: Any, uom: str | None) -> pd.DataFrame:
    s = st.iloc[rows]
    n = len(rows)
    return pd.DataFrame({
        "subject_id": s["subject_id"].to_numpy(), "hadm_id": s["hadm_id"].to_numpy(),
        "stay_id": s["stay_id"].to_numpy(), "charttime": _at(s["intime"].to_numpy(), hours),
        "itemid": itemid, "value": np.broadcast_to(np.asarray(value, dtype=object), n),
        "valuenum": np.broadcast_to(np.asarray(valuenum, dtype=float), n), "valueuom": uom})


def _gcs(total: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """Eye (1–4), verbal (1–5), motor (1–6) summing to ``total`` (3–15)."""
    extra = np.asarray(total) - 3
    motor = 1 + np.minimum(extra, 5)
    verbal = 1 + np.minimum(extra - (motor - 1), 4)
    eyes = 1 + extra - (motor - 1) - (verbal - 1)
    return eyes, verbal, motor


def chartevents(rng: Rng, st: pd.DataFrame, parts: pd.DataFrame,
                span: NDArray[Any], bg_h: NDArray[Any]) -> pd.DataFrame:
    """Heart rate, MAP, GCS and ventilator mode rows (see the module docstring)."""
    n = len(st)
    rows = np.arange(n)
    los = st["los_h"].to_numpy()
    edge = np.minimum(0.25, 0.05 * los) * _uniform(rng, 0.0, 1.0, n)
    frames = [_chart(st, rows, edge, 220045, None, None, "bpm"),
              _chart(st, rows, los - edge, 220045, None, None, "bpm")]
    cardio = parts["cardiovascular"].to_numpy()
    low = np.where(cardio == 1, _uniform(rng, 58, 68, n),
                   np.where(cardio == 0, _uniform(rng, 72, 95, n), _uniform(rng, 60, 90, n)))
    for mbp, (lo_f, hi_f) in ((low, (0.1, 0.45)), (_uniform(rng, 72, 95, n), (0.55, 0.9))):
        frames.append(_chart(st, rows, _uniform(rng, lo_f, hi_f, n) * span, 220181, None,
                             np.round(mbp), "mmHg"))
    lo, hi = np.array(GCS_BANDS).T[:, parts["cns"].to_numpy()]
    eyes, verbal, motor = _gcs(rng.integers(lo, hi + 1))
    t_gcs = _uniform(rng, 0.1, 0.9, n) * span
    for itemid, score, words in ((220739, eyes, EYES), (223900, verbal, VERBAL),
                                 (223901, motor, MOTOR)):
        frames.append(_chart(st, rows, t_gcs, itemid, np.asarray(words, dtype=object)[score - 1],
                             score, None))
    vent = np.flatnonzero(parts["respiration"].to_numpy() >= 3)
    gap = np.clip(0.1 * span[vent], 1 / 60, 1.0)  # a minute at least: a stay may last seconds
    for sign in (-1, 1):
        frames.append(_chart(st, vent, bg_h[vent] + sign * gap, 223849, "CMV/ASSIST", np.nan,
                             None))
    out = pd.concat(frames, ignore_index=True)
    hr = out["itemid"] == 220045
    out.loc[hr, "valuenum"] = np.round(rng.uniform(62, 118, int(hr.sum())))
    out.loc[hr, "value"] = out.loc[hr, "valuenum"].astype(int).astype(str)
    num = out["value"].isna() & out["valuenum"].notna()
    out.loc[num, "value"] = out.loc[num, "valuenum"].astype(int).astype(str)
    out["caregiver_id"] = rng.integers(10_000, 99_999, len(out))
    out["storetime"] = out["charttime"] + pd.to_timedelta(rng.integers(1, 40, len(out)), "min")
    out["warning"] = 0
    return out.sort_values(["subject_id", "charttime", "itemid"], ignore_index=True)


def blood_gas(rng: Rng, st: pd.DataFrame, parts: pd.DataFrame,
              bg_h: NDArray[Any]) -> pd.DataFrame:
    """One arterial blood gas per stay (labevents rows sharing a specimen: ``item`` is the
    itemid, ``value`` the text)."""
    n = len(st)
    lo, hi, fio2 = np.array(PF_BANDS, dtype=float).T[:, parts["respiration"].to_numpy()]
    po2 = np.round(_uniform(rng, lo, hi, n) * fio2 / 100)
    when = _at(st["intime"].to_numpy(), bg_h)
    frames = [pd.DataFrame({"subject_id": st["subject_id"].to_numpy(),
                            "hadm_id": st["hadm_id"].to_numpy(), "gas": np.arange(n),
                            "itemid": item, "charttime": when, "value": value, "valuenum": num,
                            "valueuom": uom})
              for item, value, num, uom in (
                  (52033, "ART.", np.nan, ""), (50816, fio2.astype(int).astype(str), fio2, "%"),
                  (50821, po2.astype(int).astype(str), po2, "mm Hg"))]
    return pd.concat(frames, ignore_index=True)


def inputevents(rng: Rng, st: pd.DataFrame, parts: pd.DataFrame,
                span: NDArray[Any]) -> pd.DataFrame:
    """One vasopressor/inotrope infusion for cardiovascular 2–4."""
    cardio = parts["cardiovascular"].to_numpy()
    rows = np.flatnonzero(cardio >= 2)
    k = cardio[rows]
    n = len(rows)
    rate = np.select([k == 2, k == 3], [_uniform(rng, 2.5, 10, n), _uniform(rng, 0.02, 0.09, n)],
                     _uniform(rng, 0.12, 0.4, n)).round(3)
    s = st.iloc[rows]
    start = _at(s["intime"].to_numpy(), _uniform(rng, 0.1, 0.6, n) * span[rows])
    hours = _uniform(rng, 1, 4, n)
    weight = np.round(_uniform(rng, 55, 110, n), 1)
    order = 1_000_000 + rng.permutation(max(n, 1))[:n]
    return pd.DataFrame({
        "subject_id": s["subject_id"].to_numpy(), "hadm_id": s["hadm_id"].to_numpy(),
        "stay_id": s["stay_id"].to_numpy(), "caregiver_id": rng.integers(10_000, 99_999, n),
        "starttime": start, "endtime": _at(start, hours), "storetime": _at(start, hours),
        "itemid": np.where(k == 2, 221653, 221906),
        "amount": np.round(rate * weight * 60 * hours / 1000, 4), "amountuom": "mg",
        "rate": rate, "rateuom": "mcg/kg/min", "orderid": order, "linkorderid": order,
        "ordercategoryname": "01-Drips", "secondaryordercategoryname": "02-Fluids (Crystalloids)",
        "ordercomponenttypedescription": "Main order parameter",
        "ordercategorydescription": "Continuous Med", "patientweight": weight,
        "totalamount": 250.0, "totalamountuom": "mL", "isopenbag": 0, "continueinnextdept": 0,
        "statusdescription": "FinishedRunning", "originalamount": np.nan,
        "originalrate": rate}).sort_values(["subject_id", "starttime"], ignore_index=True)


def outputevents(rng: Rng, st: pd.DataFrame, parts: pd.DataFrame) -> pd.DataFrame:
    """Three Foley volumes per stay in the first day (their sum in the urine-output band)."""
    n = len(st)
    lo, hi = np.array([UO_BANDS[int(k)] for k in parts["uo_points"]], dtype=float).T
    total = _uniform(rng, lo, hi, n)
    share = rng.dirichlet([4.0, 4.0, 4.0], n)
    span = np.minimum(23.5, st["los_h"].to_numpy())
    frames = []
    for j in range(3):
        hours = span * (j + _uniform(rng, 0.2, 0.9, n)) / 3
        when = _at(st["intime"].to_numpy(), hours)
        frames.append(pd.DataFrame({
            "subject_id": st["subject_id"].to_numpy(), "hadm_id": st["hadm_id"].to_numpy(),
            "stay_id": st["stay_id"].to_numpy(), "caregiver_id": rng.integers(10_000, 99_999, n),
            "charttime": when, "storetime": _at(when, _uniform(rng, 0.05, 0.5, n)),
            "itemid": 226559, "value": np.floor(total * share[:, j]), "valueuom": "mL"}))
    return pd.concat(frames, ignore_index=True).sort_values(["subject_id", "charttime"],
                                                            ignore_index=True)


def d_items() -> pd.DataFrame:
    """``mimiciv_icu.d_items`` for the written items."""
    out = pd.DataFrame(D_ITEMS, columns=["itemid", "label", "abbreviation", "linksto", "category",
                                         "unitname", "param_type"])
    out["lownormalvalue"] = np.nan
    out["highnormalvalue"] = np.nan
    return out
