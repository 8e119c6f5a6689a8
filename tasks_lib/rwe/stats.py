"""Effect estimates with the libraries of ``../shared/specs/rwe.md`` §9.4.

Logistic OR (statsmodels Logit, Wald CI and p), modified-Poisson RR/PR (GLM Poisson with robust
HC0 errors), Cox HR (lifelines CoxPHFitter, Efron ties), log-rank p (lifelines) and AUC
(scikit-learn). Each returns plain floats. Each estimator imports its library when it runs (each
costs 1–3 s of imports, mostly the same scipy.stats): the analysis prelude of a sandboxed agent
imports this module, and one study needs one or two of them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

Z95 = 1.959963984540054


class Effect(NamedTuple):
    """A ratio estimate with its 95 % CI and two-sided p-value."""

    ratio: float
    lower: float
    upper: float
    p: float

    def fields(self, prefix: str, p_field: str | None = None) -> dict[str, float]:
        """As field values: ``prefix``, ``prefix_lo``, ``prefix_hi`` (+ ``p_field``)."""
        out = {prefix: self.ratio, f"{prefix}_lo": self.lower, f"{prefix}_hi": self.upper}
        if p_field is not None:
            out[p_field] = self.p
        return out


def _design(df: pd.DataFrame, terms: list[str]) -> pd.DataFrame:
    import statsmodels.api as sm

    return pd.DataFrame(sm.add_constant(df[terms].astype(float), has_constant="add"))


def _wald(beta: float, se: float, p: float) -> Effect:
    return Effect(float(np.exp(beta)), float(np.exp(beta - Z95 * se)),
                  float(np.exp(beta + Z95 * se)), float(p))


def logistic(df: pd.DataFrame, outcome: str, terms: list[str]) -> dict[str, Effect]:
    """Odds ratios of every term from a logistic regression of ``outcome`` on ``terms``."""
    import statsmodels.api as sm

    fit = sm.Logit(df[outcome].astype(float), _design(df, terms)).fit(disp=0)
    return {t: _wald(fit.params[t], fit.bse[t], fit.pvalues[t]) for t in terms}


def poisson_robust(df: pd.DataFrame, outcome: str, terms: list[str]) -> dict[str, Effect]:
    """Risk/prevalence ratios from a modified Poisson regression (robust HC0 errors)."""
    import statsmodels.api as sm

    fit = sm.GLM(df[outcome].astype(float), _design(df, terms),
                 family=sm.families.Poisson()).fit(cov_type="HC0")
    return {t: _wald(fit.params[t], fit.bse[t], fit.pvalues[t]) for t in terms}


def cox(df: pd.DataFrame, duration: str, event: str, terms: list[str]) -> dict[str, Effect]:
    """Hazard ratios from a Cox model (lifelines)."""
    from lifelines import CoxPHFitter

    cph = CoxPHFitter()
    cph.fit(df[[*terms, duration, event]].astype(float), duration_col=duration, event_col=event)
    s = cph.summary
    return {t: Effect(float(s.loc[t, "exp(coef)"]), float(s.loc[t, "exp(coef) lower 95%"]),
                      float(s.loc[t, "exp(coef) upper 95%"]), float(s.loc[t, "p"]))
            for t in terms}


def logrank_p(df: pd.DataFrame, duration: str, event: str, group: str) -> float:
    """Log-rank p-value between ``group`` == 1 and == 0."""
    from lifelines.statistics import logrank_test

    a, b = df[df[group] == 1], df[df[group] == 0]
    res = logrank_test(a[duration], b[duration], event_observed_A=a[event],
                       event_observed_B=b[event])
    return float(res.p_value)


def auc(y: pd.Series, score: pd.Series) -> float:
    """Area under the ROC curve of ``score`` for ``y``."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y.astype(int), score.astype(float)))
