"""Paired statistics for leaderboards (pure): a bootstrap confidence interval of one agent's task
score over items, a paired test between two agents on the items both answered, and the Holm
correction over a family of tests. Library implementations only (``scipy.stats.bootstrap``,
``permutation_test``, ``binomtest``; ``statsmodels`` ``multipletests``), seeded, so a report
recomputes to the same numbers.

Conventions, stated once:

* **Items are the unit.** An agent's outcome on an item is the mean over its replicates of that
  item (replicates are clustered within items: the bootstrap resamples items, never replicate
  rows, so k replicates of one item do not count as k independent observations).
* **Weights** make the statistic the task score: ``Σ wᵢ xᵢ / Σ wᵢ`` (all 1 for a plain mean over
  cases; 1 / (n_groups · n_items of the item's group) for a macro mean over strata such as QA's
  datasets). Bootstrap resamples (item, weight) pairs, so the interval is that of the ratio.
* **Interval**: bootstrap percentile interval (``method="percentile"``), 95 %, 2,000 resamples,
  seed :data:`SEED`. Percentile rather than BCa: BCa's jackknife costs n extra evaluations per
  agent (862 on the demo) and degenerates (NaN) on all-equal outcomes; percentile intervals are
  too narrow for small n (a handful of cases), which the docs state.
* **Paired test** on the items both agents have (the intersection; ``n_pairs`` says how many):
  both outcome vectors in {0, 1} → exact McNemar (the binomial test of the discordant pairs at
  ½, two-sided; it tests the item-level rate, unweighted); otherwise → paired permutation test
  (``permutation_type="samples"``: the two agents' outcomes swapped within items; two-sided;
  exact when 2ᵏ ≤ the number of resamples, k = items where they differ) of the weighted mean
  difference.
* **Fewer than** :data:`MIN_ITEMS` items (a challenge cell with one case) → no interval and no
  test, with the reason; never a number computed from one observation.
* **Holm** (``multipletests(method="holm")``'s arithmetic, computed here without its
  ``gc.collect()``) over a family of tests at level α = 0.05: it
  controls the family-wise error rate; tests without a p value are not in the family.
* **Stratified** statistics (a macro over strata of items, each stratum counting once whatever
  its size, such as MedBench's task → dimension → overall) resample items *within* each stratum
  (:func:`stratified_bootstrap`): ``scipy.stats.bootstrap`` with one sample per stratum and
  ``paired=False`` resamples each sample on its own, which is exactly that. Two agents on the
  same items are compared by the **paired bootstrap** of the difference on the same resamples
  (:func:`paired_bootstrap_test`), not a permutation: the statistic need not be a mean of
  per-item outcomes, and the agents may have different numbers of replicates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from pydantic import Field

from evaluators.core import Frozen

SEED = 20231
"""Seed of every bootstrap and permutation draw (a fresh generator per call)."""
MIN_ITEMS = 2
"""Fewest items (or item pairs) an interval or a test is computed from."""
MCNEMAR = "mcnemar-exact"
PERMUTATION = "paired-permutation"
BOOTSTRAP_TEST = "paired-bootstrap"


def _stats() -> Any:
    """``scipy.stats``, imported on first use (it costs ~1 s to import; a report that computes
    no interval should not pay it)."""
    from scipy import stats

    return stats


class SignificanceSettings(Frozen):
    """How the intervals and tests of a report are computed (shown with every report)."""

    ci_method: str = Field(default="bootstrap-percentile",
                           description="Interval: bootstrap percentile over items "
                                       "(scipy.stats.bootstrap, method='percentile').")
    ci_level: float = Field(default=0.95, description="Confidence level of the interval.")
    n_resamples: int = Field(default=2000, description="Bootstrap resamples and permutation "
                                                       "resamples.")
    seed: int = Field(default=SEED, description="Seed of every resampling draw.")
    cluster: str = Field(default="item: mean over replicates",
                         description="The resampled unit: an item, its outcome the mean over "
                                     "the agent's replicates.")
    binary_test: str = Field(default=MCNEMAR, description="Test of two 0–1 outcome vectors "
                                                          "(exact McNemar, scipy binomtest).")
    continuous_test: str = Field(default=PERMUTATION,
                                 description="Test of other outcomes (paired permutation of the "
                                             "weighted mean difference).")
    correction: str = Field(default="holm", description="Multiple-comparison correction "
                                                        "(statsmodels multipletests).")
    alpha: float = Field(default=0.05, description="Family-wise error rate.")


DEFAULT = SignificanceSettings()


class Interval(NamedTuple):
    """A confidence interval, or why there is none."""

    low: float | None
    high: float | None
    n_items: int
    reason: str | None


class PairedTest(NamedTuple):
    """A paired test of agent A against agent B on the items both have."""

    n_pairs: int
    difference: float | None
    """Weighted mean of A − B over the paired items."""
    test: str | None
    p_value: float | None
    reason: str | None
    """Why there is no p value (None when there is one)."""


class Adjusted(NamedTuple):
    """A p value after the correction, and whether the family rejects it."""

    p_adjusted: float
    significant: bool


def item_means(values: np.ndarray) -> np.ndarray:
    """Outcome per item: the mean over replicates (columns) of the known values (NaN = the
    replicate has no value for the item); an item no replicate has is NaN."""
    known = ~np.isnan(values)
    counts = known.sum(axis=1)
    totals = np.where(known, values, 0.0).sum(axis=1)
    means: np.ndarray = np.divide(totals, counts, out=np.full(len(values), np.nan),
                                  where=counts > 0)
    return means


def _ratio(x: np.ndarray, w: np.ndarray, axis: int = -1) -> np.ndarray:
    """Σ w·x / Σ w of resampled (x, w) pairs."""
    ratio: np.ndarray = np.sum(x * w, axis=axis) / np.sum(w, axis=axis)
    return ratio


def bootstrap_interval(x: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray,
                       settings: SignificanceSettings = DEFAULT) -> Interval:
    """Bootstrap percentile interval of ``Σ w·x / Σ w`` over items ((x, w) resampled in pairs).

    Args:
        x: Outcome per item (already the mean over replicates).
        weights: Weight per item (all 1 for a plain mean).
        settings: Level, resamples and seed.
    """
    xs, ws = np.asarray(x, dtype=float), np.asarray(weights, dtype=float)
    if len(xs) < MIN_ITEMS:
        return Interval(None, None, len(xs), f"{len(xs)} item(s): an interval needs at least "
                                             f"{MIN_ITEMS}")
    res = _stats().bootstrap((xs, ws), _ratio, paired=True, vectorized=True,
                          n_resamples=settings.n_resamples, method="percentile",
                          confidence_level=settings.ci_level,
                          rng=np.random.default_rng(settings.seed))
    ci = res.confidence_interval
    return Interval(float(ci.low), float(ci.high), len(xs), None)


def mcnemar_exact(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact McNemar p value of paired 0–1 outcomes: the binomial test at ½ of the
    items A has right and B wrong among the discordant items (1.0 when none is discordant).

    This is ``scipy.stats.binomtest(k, n, 0.5).pvalue``; at p = ½ the binomial is symmetric, so
    it is computed as ``min(1, 2·binom.cdf(min(k, n − k), n, ½))``, the same number at a
    twelfth of the cost (a 37-agent board has 666 pairs)."""
    a_only = int(np.sum((a == 1) & (b == 0)))
    discordant = a_only + int(np.sum((a == 0) & (b == 1)))
    if discordant == 0:
        return 1.0
    tail = _stats().binom.cdf(min(a_only, discordant - a_only), discordant, 0.5)
    return float(min(1.0, 2.0 * tail))


def paired_permutation(a: np.ndarray, b: np.ndarray, weights: np.ndarray,
                       settings: SignificanceSettings = DEFAULT) -> float:
    """Two-sided p value of the weighted mean difference A − B under swaps of the two agents'
    outcomes within items (``permutation_type="samples"``). Items where A and B agree are left
    out of the draw: swapping equal outcomes changes nothing, so the null distribution is the
    same, and with at most log₂(resamples) differing items it is enumerated exactly."""
    differ = a != b
    if not differ.any():
        return 1.0
    ws = np.asarray(weights, dtype=float)[differ]
    total = float(np.sum(weights))

    def difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.sum(ws * (x - y), axis=axis) / total  # type: ignore[no-any-return]

    res = _stats().permutation_test((a[differ], b[differ]), difference,
                                 permutation_type="samples", vectorized=True,
                                 n_resamples=settings.n_resamples, alternative="two-sided",
                                 rng=np.random.default_rng(settings.seed))
    return float(min(1.0, res.pvalue))


def is_binary(x: np.ndarray) -> bool:
    """Every outcome is 0 or 1."""
    return bool(np.all((x == 0) | (x == 1)))


def paired_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                weights: Sequence[float] | np.ndarray,
                settings: SignificanceSettings = DEFAULT) -> PairedTest:
    """Compare A and B on the same items (aligned arrays: item i of ``a`` is item i of ``b``):
    exact McNemar when both are 0–1, else the paired permutation test."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ws = np.asarray(weights, dtype=float)
    n = len(xa)
    if n < MIN_ITEMS:
        return PairedTest(n, None, None, None, f"{n} paired item(s): a test needs at least "
                                               f"{MIN_ITEMS}")
    difference = float(np.sum(ws * (xa - xb)) / np.sum(ws))
    if is_binary(xa) and is_binary(xb):
        return PairedTest(n, difference, MCNEMAR, mcnemar_exact(xa, xb), None)
    return PairedTest(n, difference, PERMUTATION, paired_permutation(xa, xb, ws, settings),
                      None)


def holm(p_values: Sequence[float | None], settings: SignificanceSettings = DEFAULT
         ) -> list[Adjusted | None]:
    """Holm-adjusted p values and rejections over the family of the given p values (None = no
    test, left out of the family and returned as None)."""
    known = [i for i, p in enumerate(p_values) if p is not None]
    out: list[Adjusted | None] = [None] * len(p_values)
    if not known:
        return out
    family = [float(p_values[i]) for i in known]  # type: ignore[arg-type]
    if settings.correction == "holm":
        reject, adjusted = _holm(np.asarray(family), settings.alpha)
    else:
        from statsmodels.stats.multitest import multipletests

        reject, adjusted, _, _ = multipletests(family, alpha=settings.alpha,
                                               method=settings.correction)
    for i, r, p in zip(known, reject, adjusted, strict=True):
        out[i] = Adjusted(float(p), bool(r))
    return out


def _holm(p: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``multipletests(p, alpha, method="holm")[:2]``, the same arithmetic step by step:
    statsmodels ends its Holm branch with ``gc.collect()``, a full collection that costs
    seconds in a process holding a large heap (a report of many cells)."""
    order = np.argsort(p)
    ranked = p[order]
    factors = np.arange(len(p), 0, -1)
    keep = ranked > alpha / factors
    first_kept = int(np.nonzero(keep)[0].min()) if keep.any() else len(p)
    keep[first_kept:] = True
    adjusted = np.minimum(np.maximum.accumulate(ranked * factors), 1.0)
    reject_out, adjusted_out = np.empty_like(keep), np.empty_like(adjusted)
    reject_out[order], adjusted_out[order] = ~keep, adjusted
    return reject_out, adjusted_out


IndexStatistic = Callable[[list[np.ndarray]], np.ndarray]
"""A stratified statistic: one integer array of item positions per stratum (shape
``(*batch, n_stratum)``: a resample of that stratum's items) → the statistic (shape ``batch``)."""


class Stratified(NamedTuple):
    """A stratified bootstrap: the percentile interval and the statistic of every resample."""

    interval: Interval
    distribution: np.ndarray | None
    """The statistic of each resample (None: no interval, see ``interval.reason``)."""


def stratified_bootstrap(sizes: Sequence[int], statistic: IndexStatistic,
                         settings: SignificanceSettings = DEFAULT) -> Stratified:
    """Bootstrap percentile interval of a statistic of strata of items, resampling items with
    replacement within each stratum (each stratum keeps its size).

    ``scipy.stats.bootstrap`` does the resampling: one sample per stratum (its item positions),
    ``paired=False``, so each sample is resampled on its own. A stratum of one item is held
    fixed (a resample of one item is that item; scipy refuses samples of fewer than two).

    Args:
        sizes: Items per stratum (each ≥ 1).
        statistic: The statistic of item positions (see :data:`IndexStatistic`); given
            ``[arange(n) for n in sizes]`` it is the statistic of the sample itself.
        settings: Level, resamples and seed.
    """
    n_items = int(sum(sizes))
    varied = [k for k, n in enumerate(sizes) if n >= MIN_ITEMS]
    if not varied:
        return Stratified(Interval(None, None, n_items, "no stratum has 2 or more items: "
                                                        "nothing to resample"), None)

    def resampled(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        batch = samples[0].shape[:-1]
        idx = [np.zeros((*batch, n), dtype=int) for n in sizes]
        for k, sample in zip(varied, samples, strict=True):
            idx[k] = sample.astype(int)
        return statistic(idx)

    res = _stats().bootstrap(tuple(np.arange(sizes[k], dtype=float) for k in varied), resampled,
                          paired=False, vectorized=True, n_resamples=settings.n_resamples,
                          method="percentile", confidence_level=settings.ci_level,
                          rng=np.random.default_rng(settings.seed))
    ci = res.confidence_interval
    return Stratified(Interval(float(ci.low), float(ci.high), n_items, None),
                      np.asarray(res.bootstrap_distribution))


def bootstrap_p_value(differences: np.ndarray) -> float:
    """Two-sided p value of "no difference" from bootstrap replicates of A − B: twice the
    smaller share of replicates on either side of 0 (ties count on both sides; each share is
    (count + 1) / (replicates + 1), so p is never 0). This is the smallest α at which the
    (1 − α) percentile interval of the difference excludes 0: the test the interval implies."""
    d = np.asarray(differences, dtype=float)
    below = (np.sum(d <= 0) + 1) / (len(d) + 1)
    above = (np.sum(d >= 0) + 1) / (len(d) + 1)
    return float(min(1.0, 2.0 * min(below, above)))


def paired_bootstrap_test(sizes: Sequence[int], a: IndexStatistic, b: IndexStatistic,
                          settings: SignificanceSettings = DEFAULT) -> PairedTest:
    """Paired stratified bootstrap test of A − B: both statistics on the same resamples of the
    same items (within strata, :func:`stratified_bootstrap`), p from :func:`bootstrap_p_value`.

    Args:
        sizes: Items per stratum, the same items for A and B.
        a: A's statistic of item positions.
        b: B's statistic of the same positions.
        settings: Resamples and seed.
    """
    n = int(sum(sizes))
    if n < MIN_ITEMS:
        return PairedTest(n, None, None, None, f"{n} paired item(s): a test needs at least "
                                               f"{MIN_ITEMS}")
    whole = [np.arange(k) for k in sizes]
    difference = float(a(whole) - b(whole))
    drawn = stratified_bootstrap(sizes, lambda idx: a(idx) - b(idx), settings)
    if drawn.distribution is None:
        return PairedTest(n, difference, None, None, drawn.interval.reason)
    return PairedTest(n, difference, BOOTSTRAP_TEST, bootstrap_p_value(drawn.distribution),
                      None)
