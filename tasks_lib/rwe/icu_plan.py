"""The planted first-day SOFA of each ICU stay, split into mimic-code's six components so that the
generated measurements score exactly that split under ``firstday/first_day_sofa.sql``.

The stay's total (``stays['sofa']``, the template's severity) is fixed. Coagulation, liver and
the creatinine part of renal are read off the first-day labs the generator already drew
(platelets min, bilirubin max, creatinine max in [intime − 6 h, intime + 24 h], as
``first_day_lab`` takes them); the rest of the total is split at random over respiration,
cardiovascular and CNS (0–4 each), whose measurements (blood gas, MAP, vasopressor, GCS) are
written afterwards inside the chosen band (:mod:`tasks_lib.rwe.icu_events`). Only where the labs
alone already exceed the total (about 0.7 % of stays) or the three free parts cannot carry it are
lab values moved into another band, in the first-day window only (liver, then coagulation, then
creatinine); renal above the creatinine band is reached by a low first-day urine output
(< 500 mL: 3, < 200 mL: 4), as in mimic-code's renal rule.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import NDArray

Rng = np.random.Generator
PARTS = ["respiration", "coagulation", "liver", "cardiovascular", "cns", "renal"]


class LabRule(NamedTuple):
    """A lab component of SOFA: its itemid, which extreme scores, cut-offs and band values."""

    itemid: int
    extreme: str
    """``max`` (higher is worse) or ``min`` (lower is worse)."""
    cuts: tuple[float, float, float, float]
    """Thresholds of scores 1–4 (mimic-code's first_day_sofa.sql)."""
    bands: tuple[tuple[float, float], ...]
    """Score 0–4 → a value range well inside that score's band."""


LAB_RULES = {
    "coagulation": LabRule(51265, "min", (150.0, 100.0, 50.0, 20.0),
                           ((160, 300), (105, 145), (55, 95), (25, 45), (8, 18))),
    "liver": LabRule(50885, "max", (1.2, 2.0, 6.0, 12.0),
                     ((0.3, 1.1), (1.3, 1.9), (2.2, 5.5), (6.5, 11.5), (12.5, 20.0))),
    "renal": LabRule(50912, "max", (1.2, 2.0, 3.5, 5.0),
                     ((0.6, 1.1), (1.3, 1.9), (2.1, 3.3), (3.6, 4.8), (5.2, 7.5))),
}
"""Platelets, total bilirubin, creatinine (first_day_lab's platelets_min, bilirubin_total_max,
creatinine_max)."""
RAISE_ORDER = ["renal", "liver", "coagulation"]
LOWER_ORDER = ["liver", "coagulation", "renal"]


def score(rule: LabRule, value: NDArray[Any]) -> NDArray[Any]:
    """SOFA points of ``value`` under ``rule`` (NaN: 0, as mimic-code's missing component)."""
    v = np.asarray(value, dtype=float)
    c1, c2, c3, c4 = rule.cuts
    if rule.extreme == "max":
        conds = [v >= c4, v >= c3, v >= c2, v >= c1]
    else:
        conds = [v < c4, v < c3, v < c2, v < c1]
    return np.asarray(np.select(conds, [4, 3, 2, 1], 0), dtype=np.int64)


class Plan(NamedTuple):
    """Per index stay: the six components and the urine-output band that carries renal."""

    parts: pd.DataFrame
    """stay_id + :data:`PARTS` + ``uo_points`` (0, 3 or 4: renal reached by urine output)."""
    labevents: pd.DataFrame
    """labevents with the moved first-day values (value, valuenum, flag)."""


def _window(labs: pd.DataFrame, icu: pd.DataFrame) -> pd.DataFrame:
    """First-day rows of the three SOFA labs with their stay (index = labevents row)."""
    ids = [r.itemid for r in LAB_RULES.values()]
    sel = labs[labs["itemid"].isin(ids)][["hadm_id", "itemid", "charttime", "valuenum"]]
    m = sel.reset_index().merge(icu[["hadm_id", "stay_id", "intime"]], on="hadm_id")
    keep = (m["charttime"] >= m["intime"] - pd.Timedelta(hours=6)) & (
        m["charttime"] <= m["intime"] + pd.Timedelta(days=1))
    return m[keep].set_index("index")


def _split_free(rng: Rng, free: NDArray[Any]) -> NDArray[Any]:
    """Split each ``free`` total over respiration, cardiovascular, CNS (0–4 each)."""
    parts = np.zeros((len(free), 3), np.int64)
    for i, d in enumerate(free):
        parts[i] = rng.multinomial(min(int(d), 12), [1 / 3] * 3)
    for _ in range(3):
        excess = np.clip(parts - 4, 0, None)
        parts = np.minimum(parts, 4) + np.roll(excess, 1, axis=1)
    return parts


def plan(rng: Rng, labs: pd.DataFrame, icu: pd.DataFrame, stays: pd.DataFrame) -> Plan:
    """Choose every stay's components and move the few lab values that must change."""
    win = _window(labs, icu)
    st = icu[["stay_id"]].merge(stays[["stay_id", "sofa"]], on="stay_id")
    total = np.minimum(st["sofa"].to_numpy(dtype=np.int64), 24)
    lab = {}
    has = {}
    for comp, rule in LAB_RULES.items():
        rows = win[win["itemid"] == rule.itemid]
        ext = rows.groupby("stay_id")["valuenum"].agg(rule.extreme)
        lab[comp] = score(rule, st["stay_id"].map(ext).to_numpy(dtype=float))
        has[comp] = st["stay_id"].isin(ext.index).to_numpy()
    target = {c: lab[c].copy() for c in LAB_RULES}
    excess = sum(lab.values()) - total
    for comp in LOWER_ORDER:
        cut = np.clip(np.minimum(excess, target[comp]), 0, None)
        target[comp] -= cut
        excess -= cut
    free = np.clip(-excess, 0, None)
    three = _split_free(rng, free)
    left = free - three.sum(axis=1)
    for comp in RAISE_ORDER:
        room = np.where(has[comp], 4 - target[comp], 0)
        if comp == "renal":  # urine output reaches 3 or 4 without creatinine
            room = np.where(has[comp] | (target[comp] + left >= 3), 4 - target[comp], 0)
        add = np.minimum(left, room)
        target[comp] += add
        left -= add
    uo = np.where(target["renal"] > lab["renal"], target["renal"], 0)
    uo = np.where(uo >= 3, uo, 0)
    target_cr = np.where(uo > 0, lab["renal"], target["renal"])
    if (left > 0).any():
        raise ValueError("SOFA total cannot be carried by the generated measurements")
    parts = pd.DataFrame({"stay_id": st["stay_id"], "respiration": three[:, 0],
                          "coagulation": target["coagulation"], "liver": target["liver"],
                          "cardiovascular": three[:, 1], "cns": three[:, 2],
                          "renal": target["renal"], "uo_points": uo})
    want = {"coagulation": target["coagulation"], "liver": target["liver"], "renal": target_cr}
    return Plan(parts, _move_labs(rng, labs, win, st["stay_id"].to_numpy(), lab, want))


def _move_labs(rng: Rng, labs: pd.DataFrame, win: pd.DataFrame, stay_ids: NDArray[Any],
               now: dict[str, NDArray[Any]], want: dict[str, NDArray[Any]]) -> pd.DataFrame:
    """Move the first-day values of the stays whose lab score must change into the wanted
    band: values scoring above it are redrawn inside it, and if the extreme scores below it,
    the extreme value is."""
    out = labs.copy()
    for comp, rule in LAB_RULES.items():
        changed = stay_ids[now[comp] != want[comp]]
        goal = dict(zip(stay_ids, want[comp], strict=True))
        rows = win[(win["itemid"] == rule.itemid) & win["stay_id"].isin(changed)]
        for stay, group in rows.groupby("stay_id"):
            k = int(goal[stay])
            lo, hi = rule.bands[k]
            vals = group["valuenum"]
            above = vals.index[score(rule, vals.to_numpy()) > k]
            out.loc[above, "valuenum"] = np.round(rng.uniform(lo, hi, len(above)), 2)
            current = out.loc[group.index, "valuenum"]
            ext = current.idxmax() if rule.extreme == "max" else current.idxmin()
            if score(rule, np.array([out.at[ext, "valuenum"]]))[0] < k:
                out.at[ext, "valuenum"] = round(float(rng.uniform(lo, hi)), 2)
    moved = out["valuenum"].ne(labs["valuenum"]) & out["valuenum"].notna()
    out.loc[moved, "value"] = out.loc[moved, "valuenum"].astype(str)
    ranged = out["ref_range_upper"] > out["ref_range_lower"]
    abnormal = ranged & ((out["valuenum"] < out["ref_range_lower"])
                         | (out["valuenum"] > out["ref_range_upper"]))
    out.loc[moved, "flag"] = np.where(abnormal[moved], "abnormal", "")
    return out
