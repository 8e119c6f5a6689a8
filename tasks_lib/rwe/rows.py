"""Final hosp rows: labevents, prescriptions, diagnoses/procedures and their dictionaries."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from tasks_lib.rwe import vocab
from tasks_lib.rwe.events import ADMISSION_COLUMNS, Events

Rng = np.random.Generator
HOUR_S = 3600


def hosp_tables(rng: Rng, adm: pd.DataFrame, ev: Events) -> dict[str, pd.DataFrame]:
    """Every remaining ``mimiciv_hosp`` table (admissions without internal columns too)."""
    other = adm[~adm["index_stay"]].reset_index(drop=True)
    labs = pd.concat([ev.labs[["subject_id", "hadm_id", "item", "charttime", "valuenum"]],
                      _other_labs(rng, other)], ignore_index=True)
    drugs = pd.concat([ev.drugs[["subject_id", "hadm_id", "cls", "starttime"]],
                       _background_drugs(rng, adm)], ignore_index=True)
    dx = pd.concat([ev.dx[["subject_id", "hadm_id", "icd10", "concept"]],
                    _background_dx(rng, adm)], ignore_index=True)
    diagnoses, d_icd = _diagnoses(rng, dx)
    procedures, d_proc = _procedures(rng, adm)
    return {"mimiciv_hosp.admissions": adm[ADMISSION_COLUMNS],
            "mimiciv_hosp.labevents": _labevents(rng, labs),
            "mimiciv_hosp.d_labitems": _d_labitems(),
            "mimiciv_hosp.prescriptions": _prescriptions(rng, drugs),
            "mimiciv_hosp.diagnoses_icd": diagnoses, "mimiciv_hosp.d_icd_diagnoses": d_icd,
            "mimiciv_hosp.procedures_icd": procedures, "mimiciv_hosp.d_icd_procedures": d_proc}


def _other_labs(rng: Rng, other: pd.DataFrame) -> pd.DataFrame:
    items = ["creatinine", "glucose", "sodium"]
    rep = other.loc[other.index.repeat(len(items))].reset_index(drop=True)
    item = np.tile(items, len(other))
    lab = [vocab.LABS[i] for i in item]
    mid = np.array([(x.low + x.high) / 2 for x in lab])
    half = np.array([(x.high - x.low) / 2 for x in lab])
    charttime = rep["admittime"].to_numpy() + (rng.uniform(1, 10, len(rep)) * HOUR_S
                                               ).astype("timedelta64[s]")
    return pd.DataFrame({"subject_id": rep["subject_id"], "hadm_id": rep["hadm_id"],
                         "item": item, "charttime": charttime,
                         "valuenum": np.round(mid + rng.normal(0, 0.6, len(rep)) * half, 2)})


def _background_drugs(rng: Rng, adm: pd.DataFrame) -> pd.DataFrame:
    n = rng.integers(0, 4, len(adm))
    rep = adm.loc[adm.index.repeat(n)].reset_index(drop=True)
    span = (rep["dischtime"] - rep["admittime"]).dt.total_seconds().to_numpy()
    start = rep["admittime"].to_numpy() + (rng.uniform(0, 0.9, len(rep)) * span
                                           ).astype("timedelta64[s]")
    return pd.DataFrame({"subject_id": rep["subject_id"], "hadm_id": rep["hadm_id"],
                         "cls": "background", "starttime": start})


def _background_dx(rng: Rng, adm: pd.DataFrame) -> pd.DataFrame:
    n = rng.integers(0, 5, len(adm)) + (~adm["index_stay"]).to_numpy()
    rep = adm.loc[adm.index.repeat(n)].reset_index(drop=True)
    pick = rng.integers(0, len(vocab.BACKGROUND), len(rep))
    frame = pd.DataFrame({"subject_id": rep["subject_id"], "hadm_id": rep["hadm_id"],
                          "icd10": rep["icd10"], "concept": np.char.add("bg:", pick.astype(str))})
    return frame.drop_duplicates(["hadm_id", "concept"])


def _code_of(rng: Rng, concept: NDArray[Any], icd10: NDArray[Any]) -> tuple[list[str], list[int]]:
    codes, versions = [], []
    choice = rng.random(len(concept))
    for c, ten, u in zip(concept, icd10, choice, strict=True):
        if c.startswith("bg:"):
            code = vocab.BACKGROUND[int(c[3:])][1 if ten else 0]
        else:
            options = vocab.DIAGNOSES[c][1 if ten else 0]
            code = options[int(u * len(options))]
        codes.append(code.code)
        versions.append(code.version)
    return codes, versions


def _diagnoses(rng: Rng, dx: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    codes, versions = _code_of(rng, dx["concept"].to_numpy(), dx["icd10"].to_numpy())
    out = pd.DataFrame({"subject_id": dx["subject_id"], "hadm_id": dx["hadm_id"],
                        "icd_code": codes, "icd_version": versions})
    out = out.drop_duplicates(["hadm_id", "icd_code"]).reset_index(drop=True)
    out["order"] = np.arange(len(out))
    out = out.sort_values(["subject_id", "hadm_id", "order"], kind="stable", ignore_index=True)
    out["seq_num"] = out.groupby("hadm_id").cumcount() + 1
    every = [c for pair in vocab.DIAGNOSES.values() for group in pair for c in group]
    every += [c for pair in vocab.BACKGROUND for c in pair]
    d_icd = pd.DataFrame(sorted({(c.code, c.version, c.title) for c in every}),
                         columns=["icd_code", "icd_version", "long_title"])
    return out[["subject_id", "hadm_id", "seq_num", "icd_code", "icd_version"]], d_icd


def _procedures(rng: Rng, adm: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    sel = adm[adm["index_stay"] & (rng.random(len(adm)) < 0.3)].reset_index(drop=True)
    pick = rng.integers(0, len(vocab.PROCEDURES), len(sel))
    codes = [vocab.PROCEDURES[p][1 if ten else 0] for p, ten in zip(pick, sel["icd10"],
                                                                     strict=True)]
    span = (sel["dischtime"] - sel["admittime"]).dt.total_seconds().to_numpy()
    date = sel["admittime"].to_numpy() + (rng.uniform(0, 0.8, len(sel)) * span
                                          ).astype("timedelta64[s]")
    out = pd.DataFrame({"subject_id": sel["subject_id"], "hadm_id": sel["hadm_id"], "seq_num": 1,
                        "chartdate": pd.Series(date).dt.strftime("%Y-%m-%d"),
                        "icd_code": [c.code for c in codes],
                        "icd_version": [c.version for c in codes]})
    every = sorted({(c.code, c.version, c.title) for pair in vocab.PROCEDURES for c in pair})
    return (out.sort_values(["subject_id", "hadm_id"], ignore_index=True),
            pd.DataFrame(every, columns=["icd_code", "icd_version", "long_title"]))


def _labevents(rng: Rng, labs: pd.DataFrame) -> pd.DataFrame:
    labs = labs.sort_values(["subject_id", "charttime", "item"], kind="stable",
                            ignore_index=True)
    info = pd.DataFrame(vocab.LABS.values(), index=list(vocab.LABS))
    items = info.loc[labs["item"]].reset_index(drop=True)
    low, high = items["low"].to_numpy(), items["high"].to_numpy()
    val = labs["valuenum"].to_numpy()
    n = len(labs)
    ranged = high > low
    return pd.DataFrame({
        "labevent_id": np.arange(1, n + 1), "subject_id": labs["subject_id"],
        "hadm_id": labs["hadm_id"], "specimen_id": 1_000_000 + rng.permutation(n),
        "itemid": items["itemid"], "order_provider_id": "",
        "charttime": labs["charttime"].dt.floor("s"),
        "storetime": (labs["charttime"] + pd.Timedelta(hours=1)).dt.floor("s"),
        "value": labs["valuenum"].astype(str), "valuenum": val, "valueuom": items["uom"],
        "ref_range_lower": np.where(ranged, low, np.nan),
        "ref_range_upper": np.where(ranged, high, np.nan),
        "flag": np.where(ranged & ((val < low) | (val > high)), "abnormal", ""),
        "priority": np.where(rng.random(n) < 0.6, "STAT", "ROUTINE"), "comments": ""})


def _d_labitems() -> pd.DataFrame:
    rows = sorted({(i.itemid, i.label, i.fluid, i.category) for i in vocab.LABS.values()})
    return pd.DataFrame(rows, columns=["itemid", "label", "fluid", "category"])


def _prescriptions(rng: Rng, drugs: pd.DataFrame) -> pd.DataFrame:
    drugs = drugs.sort_values(["subject_id", "starttime", "cls"], kind="stable",
                              ignore_index=True)
    n = len(drugs)
    product = [vocab.DRUGS[c][k % len(vocab.DRUGS[c])]
               for c, k in zip(drugs["cls"], rng.integers(0, 12, n), strict=True)]
    start = drugs["starttime"].dt.floor("s")
    stop = start + pd.to_timedelta(rng.uniform(12, 96, n) * HOUR_S, unit="s").floor("s")
    seq = drugs.groupby("subject_id").cumcount() + 1
    return pd.DataFrame({
        "subject_id": drugs["subject_id"], "hadm_id": drugs["hadm_id"],
        "pharmacy_id": 50_000_000 + rng.permutation(n),
        "poe_id": drugs["subject_id"].astype(str) + "-" + seq.astype(str), "poe_seq": seq,
        "order_provider_id": "", "starttime": start, "stoptime": stop, "drug_type": "MAIN",
        "drug": [p.drug for p in product], "formulary_drug_cd": [p.formulary_drug_cd
                                                                 for p in product],
        "gsn": "", "ndc": "0", "prod_strength": [p.prod_strength for p in product],
        "form_rx": "", "dose_val_rx": [p.dose for p in product],
        "dose_unit_rx": [p.unit for p in product], "form_val_disp": "1",
        "form_unit_disp": "UDCUP", "doses_per_24_hrs": 1.0,
        "route": [p.route for p in product]})
