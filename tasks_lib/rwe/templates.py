"""Study templates: structural causal models overlaid on sub-populations of ICU stays.

Each template draws, for its ``n`` index ICU stays, the confounders (age, SOFA), the exposure
(propensity model), the outcome with a planted effect, and the traps a protocol-faithful analysis
avoids (``../shared/specs/rwe.md`` §9.2). It returns an :class:`Overlay`: per-stay columns plus the
events (labs, drugs, diagnoses) that make exposure and outcome visible in the database. Rows are
positional (0..n-1); :mod:`tasks_lib.rwe.ehr` maps them to ids and timestamps.

Planted truths (:data:`PLANTED`) are true parameters of the generating model; the reference answer
is what the protocol's analysis estimates from the finite data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import NDArray

Rng = np.random.Generator
WEIBULL_SHAPE = 0.6
"""Weibull shape of every planted survival model (decreasing hazard; proportional hazards)."""

PLANTED: dict[str, float] = {
    "statin_hr_28d": 0.5, "statin_hr_short_stay": 5.0, "lactate_t3_or": 2.5,
    "lactate_t2_or": 1.0, "diuretic_hyponatremia_pr": 1.8, "albumin_low_or": 2.0,
    "glucose_hr_nontraumatic": 1.8, "glucose_hr_traumatic": 1.0, "ppi_or_influenza": 1.0,
    "nlr_q4_hr": 2.0,
}
"""Planted parameters (never written to the study database)."""


class Overlay(NamedTuple):
    """What a template adds for its ``n`` stays (``row`` = position 0..n-1)."""

    stays: pd.DataFrame
    """Per stay: age, female, sofa, los_icu, post_icu (days), t_death (days from intime, NaN =
    alive), sepsis3 (bool), infection_h (suspected infection, hours from intime, NaN = none)."""
    labs: pd.DataFrame
    """row, item (``vocab.LABS`` key), offset_h (from intime), valuenum."""
    drugs: pd.DataFrame
    """row, cls (``vocab.DRUGS`` key), offset_h."""
    dx: pd.DataFrame
    """row, concept (``vocab.DIAGNOSES`` key), in coding order."""
    replaced_labs: frozenset[str]
    """Background-panel items this template draws itself (left out of the panel)."""


def expit(x: NDArray[Any]) -> NDArray[Any]:
    """Logistic function."""
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def bern(rng: Rng, logit: NDArray[Any]) -> NDArray[Any]:
    """Bernoulli draws with the given log-odds."""
    return np.asarray(rng.random(len(logit)) < expit(logit))


def weibull_days(rng: Rng, lp: NDArray[Any], lam: float) -> NDArray[Any]:
    """Survival times (days) with hazard lam·k·t^(k-1)·exp(lp) (proportional hazards)."""
    e = rng.exponential(size=len(lp))
    return np.asarray((e / (lam * np.exp(lp))) ** (1.0 / WEIBULL_SHAPE))


def _base(rng: Rng, n: int, age_mu: float, age_sd: float, sofa_lam: float,
          sofa_min: int = 0) -> pd.DataFrame:
    age = np.clip(np.round(rng.normal(age_mu, age_sd, n)), 18, 91)
    sofa = np.clip(sofa_min + rng.poisson(sofa_lam, n), 0, 20)
    los = np.clip(rng.lognormal(np.log(3.0), 0.6, n), 1.1, 40.0)
    return pd.DataFrame({"age": age, "female": rng.random(n) < 0.45, "sofa": sofa,
                         "los_icu": los, "post_icu": rng.uniform(0.5, 8.0, n),
                         "t_death": np.full(n, np.nan), "sepsis3": np.zeros(n, bool),
                         "infection_h": np.full(n, np.nan)})


def _hospital_death(rng: Rng, s: pd.DataFrame, dead: NDArray[Any], min_days: float = 1.05) -> None:
    """Place in-hospital deaths (``dead``) inside the stay; some survivors die later."""
    span = s["los_icu"].to_numpy() + s["post_icu"].to_numpy()
    inside = np.maximum(min_days, rng.uniform(0.1, 0.95, len(s)) * span)
    later = span + rng.uniform(30, 700, len(s))
    late_death = rng.random(len(s)) < 0.15
    s["t_death"] = np.where(dead, inside, np.where(late_death, later, np.nan))


def _events(rows: NDArray[Any], **cols: NDArray[Any] | str | float) -> pd.DataFrame:
    return pd.DataFrame({"row": rows, **{k: (np.broadcast_to(v, rows.shape) if np.ndim(v) == 0
                                              else v) for k, v in cols.items()}})


def _lab(rng: Rng, rows: NDArray[Any], item: str, values: NDArray[Any], lo: float = -5.0,
         hi: float = 20.0) -> pd.DataFrame:
    return _events(rows, item=item, offset_h=rng.uniform(lo, hi, len(rows)),
                   valuenum=np.round(values, 2))


def _dx(rows: NDArray[Any], concept: str) -> pd.DataFrame:
    return _events(rows, concept=concept)


def _drug(rng: Rng, rows: NDArray[Any], cls: str, lo: float, hi: float) -> pd.DataFrame:
    return _events(rows, cls=cls, offset_h=rng.uniform(lo, hi, len(rows)))


def _infection(rng: Rng, s: pd.DataFrame, mask: NDArray[Any]) -> pd.DataFrame:
    """Suspected infection (antibiotic + culture) for ``mask`` stays; returns antibiotic rows."""
    s["infection_h"] = np.where(mask, rng.uniform(-24.0, 12.0, len(s)), np.nan)
    rows = np.flatnonzero(mask)
    return _events(rows, cls="antibiotic", offset_h=s["infection_h"].to_numpy()[rows])


def quantile_group(x: NDArray[Any], q: int) -> NDArray[Any]:
    """0-based quantile group of each value (pandas qcut, as the analyses compute it)."""
    return np.asarray(pd.qcut(x, q, labels=False))


def sepsis(rng: Rng, n: int) -> Overlay:
    """Sepsis-3 stays: statin → 28-day death (HR 0.5; LOS < 24 h stays HR 5), NLR quartile →
    90-day death in all stays (Q4 vs Q1 HR 2; NLR falls with age, so the crude HR flips)."""
    s = _base(rng, n, 66, 14, 4.0, sofa_min=2)
    short = rng.random(n) < 0.30
    s["los_icu"] = np.where(short, rng.uniform(0.3, 0.9, n), s["los_icu"])
    htn = rng.random(n) < 0.45
    age_c = (s["age"].to_numpy() - 66) / 10
    statin = bern(rng, -1.0 + 1.1 * age_c)
    nlr = np.exp(np.log(6.0) - 0.35 * age_c + rng.normal(0, 0.6, n))
    q4 = np.zeros(n, bool)
    q4[htn] = quantile_group(nlr[htn], 4) == 3
    q4[~htn] = quantile_group(nlr[~htn], 4) == 3
    b_statin = np.where(short, np.log(PLANTED["statin_hr_short_stay"]),
                        np.log(PLANTED["statin_hr_28d"]))
    lp = b_statin * statin + 0.9 * age_c + 0.3 * (s["sofa"].to_numpy() - 6) \
        + np.log(PLANTED["nlr_q4_hr"]) * q4
    t = weibull_days(rng, lp, 0.039)
    s["t_death"] = np.where(short, np.maximum(t, s["los_icu"] + 0.1), np.maximum(t, 1.05))
    s.loc[s["t_death"] > 365, "t_death"] = np.nan
    s["sepsis3"] = True
    lymph = rng.uniform(85, 95, n) / (1 + nlr)
    neut = lymph * nlr
    wbc = np.exp(rng.normal(np.log(12), 0.4, n))
    rows = np.arange(n)
    cbc_h = rng.uniform(-5, 20, n)
    in_k = rng.random(n) < 0.5
    labs = [_events(rows, item="neutrophils_pct", offset_h=cbc_h, valuenum=np.round(neut, 1)),
            _events(rows, item="lymphocytes_pct", offset_h=cbc_h, valuenum=np.round(lymph, 1)),
            _events(rows, item="wbc", offset_h=cbc_h, valuenum=np.round(wbc, 1)),
            _events(rows, item="abs_neutrophils", offset_h=cbc_h,
                    valuenum=np.round(wbc * neut / 100, 2)),
            _events(rows[in_k], item="abs_lymphocytes", offset_h=cbc_h[in_k],
                    valuenum=np.round(wbc * lymph / 100, 2)[in_k]),
            _events(rows[~in_k], item="abs_lymphocytes_n", offset_h=cbc_h[~in_k],
                    valuenum=np.round(wbc * lymph * 10, 0)[~in_k])]
    late = ~statin & (rng.random(n) < 0.15)
    drugs = [_drug(rng, rows[statin], "statin", -24, 24), _drug(rng, rows[late], "statin", 72, 200),
             _infection(rng, s, np.ones(n, bool))]
    dx = pd.concat([_dx(rows, "sepsis"), _dx(rows[htn], "hypertension")], ignore_index=True)
    return Overlay(s, pd.concat(labs, ignore_index=True), pd.concat(drugs, ignore_index=True),
                   dx, frozenset({"wbc"}))


def heart_failure(rng: Rng, n: int) -> Overlay:
    """HF stays: lactate tertile → in-hospital death (T3 OR 2.5, T2 OR 1; SOFA confounds);
    loop diuretic → first-day hyponatremia (PR 1.5; sicker patients get fewer diuretics)."""
    s = _base(rng, n, 72, 12, 4.0, sofa_min=1)
    sofa_c = s["sofa"].to_numpy() - 5
    lactate = np.exp(np.log(1.6) + 0.22 * sofa_c + rng.normal(0, 0.45, n))
    tert = quantile_group(lactate, 3)
    logit = -1.6 + np.log(PLANTED["lactate_t3_or"]) * (tert == 2) \
        + np.log(PLANTED["lactate_t2_or"]) * (tert == 1) \
        + 0.04 * (s["age"].to_numpy() - 72) + 0.45 * sofa_c
    _hospital_death(rng, s, bern(rng, logit))
    loop = bern(rng, 0.5 - 0.7 * sofa_c)
    prev = np.clip(0.12 * PLANTED["diuretic_hyponatremia_pr"] ** loop * np.exp(0.2 * sofa_c),
                   0, 0.95)
    hypo = rng.random(n) < prev
    rows = np.arange(n)
    na1 = np.where(hypo, rng.uniform(124, 134.4, n), rng.uniform(135, 145, n))
    na2 = np.where(hypo, na1 + rng.uniform(0, 6, n), rng.uniform(135, 145, n))
    labs = [_events(rows, item="lactate", offset_h=rng.uniform(-5, 20, n),
                    valuenum=np.round(lactate, 1)),
            _lab(rng, rows, "lactate", lactate * rng.uniform(0.5, 1.5, n), 30, 60),
            _lab(rng, rows, "sodium", na1, -5, 10), _lab(rng, rows, "sodium", na2, 10, 23)]
    late = ~loop & (rng.random(n) < 0.3)
    drugs = [_drug(rng, rows[loop], "loop", -12, 23), _drug(rng, rows[late], "loop", 30, 100)]
    return Overlay(s, pd.concat(labs, ignore_index=True), pd.concat(drugs, ignore_index=True),
                   _dx(rows, "heart_failure"), frozenset({"sodium"}))


def pancreatitis(rng: Rng, n: int) -> Overlay:
    """AP stays: first-day albumin < 3.0 g/dL → KDIGO AKI within 7 days (OR 2); a decoy
    'Albumin' item (fluid Ascites, low values) on 90 % of stays."""
    s = _base(rng, n, 55, 15, 3.0, sofa_min=1)
    s["los_icu"] = rng.uniform(7.5, 14, n)
    sofa_c = s["sofa"].to_numpy() - 4
    alb = np.clip(rng.normal(3.2 - 0.08 * sofa_c, 0.55, n), 1.2, 5.0)
    a1, a2 = np.round(alb + rng.normal(0, 0.1, n), 1), np.round(alb + rng.normal(0, 0.1, n), 1)
    low = np.minimum(a1, a2) < 3.0
    aki = bern(rng, -1.3 + np.log(PLANTED["albumin_low_or"]) * low + 0.25 * sofa_c)
    _hospital_death(rng, s, bern(rng, -2.5 + 0.3 * sofa_c), min_days=7.6)
    rows = np.arange(n)
    c0 = np.clip(np.exp(rng.normal(np.log(0.9), 0.25, n)), 0.5, 1.6)
    peak_slot = rng.integers(0, 3, n)
    labs = [_lab(rng, rows, "albumin", a1, -5, 8), _lab(rng, rows, "albumin", a2, 8, 23),
            _lab(rng, rows, "creatinine", c0, -5, -1),
            _lab(rng, rows, "creatinine", c0 * rng.uniform(0.95, 1.05, n), 4, 20)]
    for slot, (lo, hi) in enumerate([(40, 56), (88, 104), (136, 152)]):
        ratio = np.where(aki & (peak_slot == slot), rng.uniform(1.6, 3.2, n),
                         np.where(aki, rng.uniform(0.9, 1.15, n), rng.uniform(0.85, 1.15, n)))
        labs.append(_lab(rng, rows, "creatinine", c0 * ratio, lo, hi))
    decoy = rng.random(n) < 0.9
    labs.append(_lab(rng, rows[decoy], "albumin_ascites", rng.uniform(0.4, 2.6, int(decoy.sum())),
                     0, 20))
    return Overlay(s, pd.concat(labs, ignore_index=True), _events(rows[:0], cls="", offset_h=0.0),
                   _dx(rows, "pancreatitis"), frozenset({"creatinine"}))


def _ich(rng: Rng, n: int, traumatic: bool) -> Overlay:
    s = _base(rng, n, 66, 14, 3.0, sofa_min=1)
    hyper = rng.random(n) < (0.6 if traumatic else 0.35)
    key = "glucose_hr_traumatic" if traumatic else "glucose_hr_nontraumatic"
    lp = np.log(PLANTED[key]) * hyper + 0.05 * (s["age"].to_numpy() - 66) \
        + 0.25 * (s["sofa"].to_numpy() - 4)
    t = weibull_days(rng, lp, 0.012 if traumatic else 0.0372)
    s["t_death"] = np.where(t > 365, np.nan, t)
    rows = np.arange(n)
    g1 = np.where(hyper, rng.uniform(185, 330, n), rng.uniform(80, 175, n))
    g2 = np.where(hyper, rng.uniform(150, 300, n), rng.uniform(80, 175, n))
    labs = pd.concat([_lab(rng, rows, "glucose", g1, -5, 4), _lab(rng, rows, "glucose", g2, 6, 23)],
                     ignore_index=True)
    dx = [_dx(rows, "ich")] + ([_dx(rows, "traumatic_ich")] if traumatic else [])
    return Overlay(s, labs, _events(rows[:0], cls="", offset_h=0.0),
                   pd.concat(dx, ignore_index=True), frozenset({"glucose"}))


def ich(rng: Rng, n: int) -> Overlay:
    """Non-traumatic ICH: admission glucose ≥ 180 mg/dL → 30-day death (HR 1.8)."""
    return _ich(rng, n, traumatic=False)


def traumatic_ich(rng: Rng, n: int) -> Overlay:
    """Traumatic ICH, also coded as ICH: hyperglycaemia common, no effect, low mortality."""
    return _ich(rng, n, traumatic=True)


def influenza(rng: Rng, n: int) -> Overlay:
    """Influenza stays: PPI → in-hospital death, planted null (OR 1); sicker patients get PPIs."""
    s = _base(rng, n, 60, 18, 3.0, sofa_min=1)
    sofa_c = s["sofa"].to_numpy() - 4
    ppi = bern(rng, -0.8 + 0.6 * sofa_c)
    logit = -2.0 + np.log(PLANTED["ppi_or_influenza"]) * ppi + 0.5 * sofa_c \
        + 0.03 * (s["age"].to_numpy() - 60)
    _hospital_death(rng, s, bern(rng, logit))
    rows = np.arange(n)
    return Overlay(s, _lab(rng, rows[:0], "glucose", np.zeros(0)),
                   _drug(rng, rows[ppi], "ppi", -12, 23), _dx(rows, "influenza"), frozenset())


def background_icu(rng: Rng, n: int) -> Overlay:
    """Other ICU stays: a PPI marks unmeasured severity (the negative control's trap); some
    have a suspected infection without Sepsis-3."""
    s = _base(rng, n, 63, 17, 3.0)
    hidden = rng.normal(0, 1, n)
    ppi = bern(rng, -0.5 + 1.2 * hidden)
    logit = -2.2 + 1.3 * hidden + 0.3 * (s["sofa"].to_numpy() - 4) \
        + 0.03 * (s["age"].to_numpy() - 63)
    _hospital_death(rng, s, bern(rng, logit))
    rows = np.arange(n)
    drugs = pd.concat([_drug(rng, rows[ppi], "ppi", -12, 23),
                       _infection(rng, s, rng.random(n) < 0.3)], ignore_index=True)
    return Overlay(s, _lab(rng, rows[:0], "glucose", np.zeros(0)), drugs,
                   _dx(rows[:0], "sepsis"), frozenset())


TEMPLATES: dict[str, tuple[float, Callable[[Rng, int], Overlay]]] = {
    "sepsis": (0.22, sepsis),
    "heart_failure": (0.14, heart_failure),
    "pancreatitis": (0.08, pancreatitis),
    "ich": (0.05, ich),
    "traumatic_ich": (0.06, traumatic_ich),
    "influenza": (0.09, influenza),
    "background_icu": (0.12, background_icu),
}
"""Template → (share of patients, overlay). The remaining patients have no ICU stay. Template
cohorts are oversampled relative to MIMIC-IV prevalence so 20,000 patients carry every study."""
