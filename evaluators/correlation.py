"""Correlation between predicted and reference scores (image-quality assessment, LDCT-IQA).

``plcc``, ``srocc`` and ``krocc`` are the textbook signed coefficients of
:func:`scipy.stats.pearsonr`, :func:`~scipy.stats.spearmanr` and :func:`~scipy.stats.kendalltau`
(Kendall's tau-b), computed once over the whole test set.

*Official LDCT-IQA 2023 score*: ``|PLCC| + |SROCC| + |KROCC|`` (range 0–3). It takes **absolute
values**, so a perfectly anti-correlated prediction scores 3 like a perfect one — the textbook
coefficients would give −3. Edge convention: if either vector is constant the coefficients are
undefined (scipy returns NaN) and each counts **0**.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric

_Coefficient = Callable[[Sequence[float], Sequence[float]], float]


def _vectors(
    prediction: Sequence[float], reference: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    pred, ref = np.asarray(prediction, dtype=float), np.asarray(reference, dtype=float)
    if pred.shape != ref.shape or pred.ndim != 1:
        raise ValueError(f"need two 1-D vectors of equal length, got {pred.shape} and {ref.shape}")
    if len(pred) < 2:
        raise ValueError("a correlation needs at least 2 items")
    if not (np.isfinite(pred).all() and np.isfinite(ref).all()):
        raise InvalidSubmissionError("scores must be finite numbers")
    return pred, ref


def _coefficient(name: str) -> _Coefficient:
    """The metric of :mod:`scipy.stats`' ``name`` (imported when first computed: scipy.stats
    costs 0.6 s of imports in every process that loads the metric catalog)."""
    def compute(prediction: Sequence[float], reference: Sequence[float]) -> float:
        from scipy import stats

        pred, ref = _vectors(prediction, reference)
        if np.ptp(pred) == 0 or np.ptp(ref) == 0:
            return 0.0
        value = float(getattr(stats, name)(pred, ref)[0])
        return 0.0 if math.isnan(value) else value

    compute.__doc__ = f"Signed {name} coefficient over the whole set (constant → 0)."
    return compute


plcc = metric("plcc", direction=Direction.HIGHER, averaging="whole test set", missing=0.0,
              description="Pearson linear correlation coefficient")(_coefficient("pearsonr"))
srocc = metric("srocc", direction=Direction.HIGHER, averaging="whole test set", missing=0.0,
               description="Spearman rank-order correlation")(_coefficient("spearmanr"))
krocc = metric("krocc", direction=Direction.HIGHER, averaging="whole test set", missing=0.0,
               description="Kendall rank-order correlation (tau-b)")(_coefficient("kendalltau"))


@metric("ldct_iqa_score", direction=Direction.HIGHER, averaging="whole test set", missing=0.0,
        description="|PLCC| + |SROCC| + |KROCC| (official LDCT-IQA 2023 score)")
def ldct_iqa_score(prediction: Sequence[float], reference: Sequence[float]) -> float:
    """The official LDCT-IQA score: the sum of the absolute coefficients."""
    return abs(plcc(prediction, reference)) + abs(srocc(prediction, reference)) + abs(
        krocc(prediction, reference))
