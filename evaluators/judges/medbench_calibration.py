"""Human calibration of the MedBench judge (spec §4.8): rater aggregation, raw agreement, κ.

* Human label of an item: ``majority`` of its raters' 0–5 scores (a tie ⇒ the median of the
  raters' scores rounded half-down) or ``mean`` (rounded half-down).
* Judge label: the judge's item score on the 0–5 scale (a weighted multi-dimension score is
  rounded half-up to an integer category).
* Raw agreement ``p_o`` = share of items where judge label = human label; Cohen's κ =
  ``(p_o − p_e)/(1 − p_e)`` over categories 0..5 (scikit-learn's ``cohen_kappa_score`` with
  ``labels=range(6)``); ``p_e = 1`` ⇒ κ undefined (NaN; report ``p_o``). The quadratic-weighted κ
  is stored too (diagnostic, or the headline with ``weighted=True``).
* A (task, rubric) is ``calibrated`` when κ ≥ 0.82 (the paper's figure, configurable) on ≥ 30
  items (configurable); otherwise ``uncalibrated``.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from enum import StrEnum
from typing import NamedTuple

from sklearn.metrics import cohen_kappa_score

from evaluators.rounding import round_half_up

CATEGORIES = list(range(6))
KAPPA_THRESHOLD = 0.82
MIN_ITEMS = 30


class Aggregation(StrEnum):
    """How several raters' scores become one human label."""

    MAJORITY = "majority"
    MEAN = "mean"


def round_half_down(x: float) -> int:
    """Nearest integer, ties toward the lower one (2.5 → 2)."""
    return math.ceil(x - 0.5)


def judge_label(score: float) -> int:
    """The judge's 0–5 category of an item score in ``[0, 1]``: ``5 · score`` rounded half-up."""
    return int(round_half_up(5 * score, 0))


def human_label(scores: Sequence[int], rule: Aggregation = Aggregation.MAJORITY) -> int:
    """One label from the raters' scores of an item."""
    if not scores:
        raise ValueError("an item needs at least one rating")
    if rule is Aggregation.MEAN:
        return round_half_down(statistics.fmean(scores))
    counts = Counter(scores).most_common()
    if len(counts) == 1 or counts[0][1] > counts[1][1]:
        return counts[0][0]
    return round_half_down(statistics.median(scores))


class Agreement(NamedTuple):
    """Judge–human agreement over a set of items."""

    n: int
    p_o: float
    p_e: float
    kappa: float
    kappa_quadratic: float


def agreement(judge: Sequence[int], human: Sequence[int]) -> Agreement:
    """Raw agreement, chance agreement, Cohen's κ (unweighted) and quadratic-weighted κ."""
    if len(judge) != len(human) or not judge:
        raise ValueError("judge and human labels must be non-empty and of equal length")
    n = len(judge)
    p_o = sum(j == h for j, h in zip(judge, human, strict=True)) / n
    cj, ch = Counter(judge), Counter(human)
    p_e = sum(cj[k] * ch[k] for k in CATEGORIES) / (n * n)
    if p_e >= 1.0:
        return Agreement(n, p_o, p_e, math.nan, math.nan)
    kappa = float(cohen_kappa_score(judge, human, labels=CATEGORIES))
    quad = float(cohen_kappa_score(judge, human, labels=CATEGORIES, weights="quadratic"))
    return Agreement(n, p_o, p_e, kappa, quad)


def status(kappa: float, n: int, threshold: float = KAPPA_THRESHOLD,
           min_items: int = MIN_ITEMS) -> str:
    """``calibrated`` when κ ≥ threshold on at least ``min_items`` items, else
    ``uncalibrated``."""
    ok = not math.isnan(kappa) and kappa >= threshold and n >= min_items
    return "calibrated" if ok else "uncalibrated"
