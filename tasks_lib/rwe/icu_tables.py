"""Adds the ICU event tables (and blood gases, cultures, repeat antibiotic doses) to a generated
EHR: :func:`add` plans each stay's SOFA components (:mod:`tasks_lib.rwe.icu_plan`), writes the
events (:mod:`tasks_lib.rwe.icu_events`) and records the components on the hidden per-stay truth
(``sofa_<component>`` columns), which :mod:`tasks_lib.rwe.derived` writes as ``first_day_sofa``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from tasks_lib.rwe import icu_events, icu_plan

Rng = np.random.Generator


def add(rng: Rng, tables: dict[str, pd.DataFrame], stays: pd.DataFrame) -> None:
    """Update ``tables`` (labevents, d_labitems, prescriptions; new ICU tables) and ``stays``
    in place."""
    icu = tables["mimiciv_icu.icustays"]
    septic_ids = stays.loc[stays["sepsis3"], "stay_id"]
    labs = _into_stay(rng, tables["mimiciv_hosp.labevents"], icu[icu["stay_id"].isin(septic_ids)])
    planned = icu_plan.plan(rng, labs, icu, stays)
    parts = planned.parts
    for c in icu_plan.PARTS:
        stays[f"sofa_{c}"] = stays["stay_id"].map(parts.set_index("stay_id")[c]).to_numpy()
    st = icu[["subject_id", "hadm_id", "stay_id", "intime", "outtime"]].copy()
    st["los_h"] = (st["outtime"] - st["intime"]).dt.total_seconds() / 3600
    # first 20 h of the stay; a quarter of an hour at least (a stay may last seconds), so that
    # rows mimic-code averages per charttime (vital signs) keep distinct times
    span = np.clip(st["los_h"].to_numpy(), 0.25, 20.0)
    bg_h = rng.uniform(0.2, 0.8, len(st)) * span
    tables["mimiciv_icu.d_items"] = icu_events.d_items()
    tables["mimiciv_icu.chartevents"] = icu_events.chartevents(rng, st, parts, span, bg_h)
    tables["mimiciv_icu.inputevents"] = icu_events.inputevents(rng, st, parts, span)
    tables["mimiciv_icu.outputevents"] = icu_events.outputevents(rng, st, parts)
    gas = icu_events.blood_gas(rng, st, parts, bg_h)
    tables["mimiciv_hosp.labevents"] = _with_gases(rng, planned.labevents, gas)
    labitems = pd.DataFrame(icu_events.BG_LABS, columns=["itemid", "label", "fluid", "category"])
    tables["mimiciv_hosp.d_labitems"] = pd.concat(
        [tables["mimiciv_hosp.d_labitems"], labitems]).sort_values("itemid", ignore_index=True)
    septic = st.merge(stays[["stay_id", "sepsis3", "infection_h"]], on="stay_id")
    septic = septic[septic["sepsis3"]].reset_index(drop=True)
    rx, first_abx = _icu_antibiotics(rng, tables["mimiciv_hosp.prescriptions"], septic)
    tables["mimiciv_hosp.prescriptions"] = rx
    tables["mimiciv_hosp.microbiologyevents"] = _cultures(rng, septic, first_abx)


def _into_stay(rng: Rng, labs: pd.DataFrame, icu: pd.DataFrame) -> pd.DataFrame:
    """Labs of ``icu``'s stays (the Sepsis-3 ones) that score SOFA and fall in the first-day
    window after ICU discharge, moved inside the stay: mimic-code's hourly SOFA (which
    ``sepsis3`` reads) counts only the stay's hours, first_day_sofa the whole window."""
    ids = [r.itemid for r in icu_plan.LAB_RULES.values()]
    m = labs[labs["itemid"].isin(ids)][["hadm_id", "charttime"]].reset_index().merge(
        icu[["hadm_id", "intime", "outtime"]], on="hadm_id")
    late = m[(m["charttime"] > m["outtime"]) & (m["charttime"] <= m["intime"] + pd.Timedelta(
        days=1))]
    span = (late["outtime"] - late["intime"]).to_numpy()
    when = late["intime"].to_numpy() + (span * rng.uniform(0.1, 0.9, len(late))).astype(
        "timedelta64[s]")
    out = labs.copy()
    out.loc[late["index"], "charttime"] = when
    out.loc[late["index"], "storetime"] = when + np.timedelta64(3600, "s")
    return out


def _with_gases(rng: Rng, labs: pd.DataFrame, gas: pd.DataFrame) -> pd.DataFrame:
    """labevents plus the blood-gas rows (one specimen per gas), renumbered in time order."""
    specimen = int(labs["specimen_id"].max()) + 1 + rng.permutation(int(gas["gas"].max()) + 1)
    rows = pd.DataFrame({
        "subject_id": gas["subject_id"], "hadm_id": gas["hadm_id"],
        "specimen_id": specimen[gas["gas"].to_numpy()], "itemid": gas["itemid"],
        "order_provider_id": "", "charttime": pd.Series(gas["charttime"]).dt.floor("s"),
        "value": gas["value"], "valuenum": gas["valuenum"], "valueuom": gas["valueuom"],
        "ref_range_lower": np.nan, "ref_range_upper": np.nan, "flag": "", "priority": "STAT",
        "comments": ""})
    rows["storetime"] = rows["charttime"] + pd.Timedelta(minutes=20)
    out = pd.concat([labs, rows], ignore_index=True).sort_values(
        ["subject_id", "charttime"], kind="stable", ignore_index=True)
    out["labevent_id"] = np.arange(1, len(out) + 1)
    return out


def _icu_antibiotics(rng: Rng, rx: pd.DataFrame,
                     septic: pd.DataFrame) -> tuple[pd.DataFrame, NDArray[Any]]:
    """Prescriptions with a repeat antibiotic dose in the ICU for Sepsis-3 stays whose planted
    antibiotic falls outside the stay; returns them and each stay's first in-ICU dose time."""
    los = septic["los_h"].to_numpy()
    inf = septic["infection_h"].to_numpy()
    inside = (inf >= 0) & (inf < los - 0.05)
    repeat_h = rng.uniform(0.1, 0.4, len(septic)) * np.minimum(los, 8.0)
    first = np.where(inside, inf, repeat_h)
    need = septic[~inside]
    abx = rx[rx["drug"].isin({d.drug for d in _antibiotics()})]
    template = abx.drop_duplicates("hadm_id").set_index("hadm_id")
    new = template.loc[need["hadm_id"]].reset_index()
    start = (need["intime"].to_numpy() + (repeat_h[~inside] * 3600).astype("timedelta64[s]"))
    new["starttime"] = pd.Series(start).dt.floor("s").to_numpy()
    new["stoptime"] = new["starttime"] + pd.Timedelta(hours=24)
    new["pharmacy_id"] = int(rx["pharmacy_id"].max()) + 1 + np.arange(len(new))
    seq = rx.groupby("subject_id")["poe_seq"].max()
    new["poe_seq"] = new["subject_id"].map(seq).to_numpy() + 1
    new["poe_id"] = new["subject_id"].astype(str) + "-" + new["poe_seq"].astype(str)
    out = pd.concat([rx, new[rx.columns]], ignore_index=True).sort_values(
        ["subject_id", "starttime"], kind="stable", ignore_index=True)
    return out, first


def _antibiotics() -> list[Any]:
    from tasks_lib.rwe import vocab

    return list(vocab.DRUGS["antibiotic"])


def _cultures(rng: Rng, septic: pd.DataFrame, first_abx_h: NDArray[Any]) -> pd.DataFrame:
    """One blood culture per Sepsis-3 stay, drawn 0.5–6 h after its first in-ICU antibiotic."""
    n = len(septic)
    when = pd.Series(septic["intime"].to_numpy() + (
        (first_abx_h + rng.uniform(0.5, 6.0, n)) * 3600).astype("timedelta64[s]")).dt.floor("s")
    positive = rng.random(n) < 0.35
    ints = {c: pd.Series(v, range(n), "Int64").where(positive) for c, v in
            (("org_itemid", 80002), ("isolate_num", 1))}
    org = pd.Series("ESCHERICHIA COLI", range(n), dtype=object).where(positive)
    return pd.DataFrame({
        "microevent_id": np.arange(1, n + 1), "subject_id": septic["subject_id"],
        "hadm_id": septic["hadm_id"], "micro_specimen_id": 8_000_000 + rng.permutation(n),
        "order_provider_id": "", "chartdate": when.dt.normalize(), "charttime": when,
        "spec_itemid": 70012, "spec_type_desc": "BLOOD CULTURE", "test_seq": 1,
        "storedate": (when + pd.Timedelta(days=2)).dt.normalize(),
        "storetime": when + pd.Timedelta(days=2), "test_itemid": 90201,
        "test_name": "Blood Culture, Routine", "org_itemid": ints["org_itemid"],
        "org_name": org, "isolate_num": ints["isolate_num"], "quantity": None,
        "ab_itemid": pd.Series(pd.NA, range(n), "Int64"), "ab_name": None,
        "dilution_text": None, "dilution_comparison": None, "dilution_value": np.nan,
        "interpretation": None, "comments": None}).sort_values(
            ["subject_id", "charttime"], ignore_index=True)
