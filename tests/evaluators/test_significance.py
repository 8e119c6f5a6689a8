"""Paired statistics (evaluators/significance.py) against hand-computed values and direct
scipy.stats / statsmodels calls on the same outcomes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from evaluators.significance import (
    DEFAULT,
    MCNEMAR,
    PERMUTATION,
    SEED,
    SignificanceSettings,
    bootstrap_interval,
    bootstrap_p_value,
    holm,
    item_means,
    mcnemar_exact,
    paired_bootstrap_test,
    paired_test,
    stratified_bootstrap,
)


def test_mcnemar_is_the_binomial_test_of_the_discordant_pairs() -> None:
    # 8 items only A has right, 2 only B, 10 both right, 5 neither:
    # p = 2 · P(X ≤ 2 | n = 10, ½) = 2 · (1 + 10 + 45) / 1024 = 0.109375
    a = np.array([1] * 8 + [0] * 2 + [1] * 10 + [0] * 5)
    b = np.array([0] * 8 + [1] * 2 + [1] * 10 + [0] * 5)
    assert mcnemar_exact(a, b) == pytest.approx(112 / 1024, abs=1e-15)
    assert mcnemar_exact(a, b) == pytest.approx(stats.binomtest(8, 10, 0.5).pvalue, abs=1e-15)
    assert mcnemar_exact(a, a) == 1.0  # no discordant pair
    rng = np.random.default_rng(7)
    for _ in range(50):
        x, y = rng.integers(0, 2, 40), rng.integers(0, 2, 40)
        k, n = int(np.sum((x == 1) & (y == 0))), int(np.sum(x != y))
        direct = stats.binomtest(k, n, 0.5).pvalue if n else 1.0
        assert mcnemar_exact(x, y) == pytest.approx(direct, abs=1e-12)


def test_paired_test_chooses_mcnemar_for_binary_and_permutation_otherwise() -> None:
    a, b = np.array([1, 1, 1, 0, 1, 0.0]), np.array([0, 0, 1, 0, 1, 1.0])
    t = paired_test(a, b, np.ones(6))
    assert (t.test, t.n_pairs, t.reason) == (MCNEMAR, 6, None)
    assert t.difference == pytest.approx(1 / 6)
    assert t.p_value == pytest.approx(stats.binomtest(2, 3, 0.5).pvalue)

    x = np.array([0.9, 0.8, 0.75, 0.6, 0.95, 0.7, 0.85, 0.5])
    y = np.array([0.7, 0.8, 0.55, 0.65, 0.75, 0.4, 0.85, 0.45])
    w = np.array([1, 1, 2, 2, 1, 1, 1, 1.0])
    t = paired_test(x, y, w)
    assert t.test == PERMUTATION and t.n_pairs == 8
    assert t.difference == pytest.approx(np.sum(w * (x - y)) / np.sum(w))
    # 2⁸ = 256 ≤ 2,000 resamples: scipy enumerates every swap, so the p value is exact and
    # equals the direct call on all eight pairs (the two equal pairs change nothing)
    direct = stats.permutation_test(
        (x, y), lambda u, v, axis: np.sum(w * (u - v), axis=axis) / np.sum(w),
        permutation_type="samples", vectorized=True, n_resamples=DEFAULT.n_resamples,
        alternative="two-sided", rng=np.random.default_rng(SEED))
    assert t.p_value == pytest.approx(direct.pvalue, abs=1e-12)


def test_one_pair_or_one_item_gives_no_number_and_says_why() -> None:
    t = paired_test([0.4], [0.2], [1.0])
    assert (t.n_pairs, t.p_value, t.test) == (1, None, None)
    assert "at least 2" in str(t.reason)
    ci = bootstrap_interval([0.7], [1.0])
    assert (ci.low, ci.high, ci.n_items) == (None, None, 1) and "at least 2" in str(ci.reason)


def test_bootstrap_interval_is_scipys_percentile_interval_of_the_weighted_mean() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2, 60).astype(float)
    w = np.where(np.arange(60) < 20, 1 / (2 * 20), 1 / (2 * 40))  # macro over two strata
    ci = bootstrap_interval(x, w)
    direct = stats.bootstrap(
        (x, w), lambda u, v, axis: np.sum(u * v, axis=axis) / np.sum(v, axis=axis),
        paired=True, vectorized=True, n_resamples=2000, method="percentile",
        confidence_level=0.95, rng=np.random.default_rng(SEED)).confidence_interval
    assert ci.low == pytest.approx(direct.low) and ci.high == pytest.approx(direct.high)
    assert ci.low is not None and ci.high is not None
    assert ci.low < np.sum(w * x) / np.sum(w) < ci.high
    assert bootstrap_interval(x, w) == ci  # seeded: the same numbers every time
    other = bootstrap_interval(x, w, SignificanceSettings(seed=SEED + 1))
    assert (other.low, other.high) != (ci.low, ci.high)


def test_item_means_average_replicates_and_skip_missing_ones() -> None:
    values = np.array([[1.0, 0.0, 1.0], [0.5, np.nan, 1.0], [np.nan, np.nan, np.nan]])
    means = item_means(values)
    assert means[:2].tolist() == [pytest.approx(2 / 3), 0.75] and np.isnan(means[2])


def test_holm_adjusts_the_known_p_values_as_statsmodels_does() -> None:
    p = [0.01, None, 0.04, 0.03, 0.2]
    out = holm(p)
    reject, adjusted, _, _ = multipletests([0.01, 0.04, 0.03, 0.2], alpha=0.05, method="holm")
    assert out[1] is None
    got = [o for o in out if o is not None]
    assert [g.p_adjusted for g in got] == pytest.approx(list(adjusted))
    assert [g.significant for g in got] == list(reject)
    # by hand: sorted 0.01·4 = 0.04, 0.03·3 = 0.09, 0.04·2 = 0.08 → 0.09 (monotone), 0.2
    assert [g.p_adjusted for g in got] == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert holm([None, None]) == [None, None]


def test_holm_equals_statsmodels_on_many_families() -> None:
    # Holm is computed without statsmodels (its Holm branch runs gc.collect()): the same
    # rejections and adjusted values on random families, with ties, all rejected, none
    # rejected, adjusted values clipped at 1, another alpha.
    rng = np.random.default_rng(7)
    families = [list(rng.uniform(0, 0.2, size=n)) for n in (1, 17, 60)]
    families += [[0.01, 0.01, 0.02, 0.02], [0.001] * 6, [0.9, 0.6, 0.8]]
    families += [list(np.round(rng.uniform(0, 0.1, size=30), 2))]
    for family, alpha in zip(families, [0.05, 0.1] * 4, strict=False):
        out = holm(family, SignificanceSettings(alpha=alpha))
        reject, adjusted, _, _ = multipletests(family, alpha=alpha, method="holm")
        assert [o.p_adjusted for o in out if o] == list(adjusted)
        assert [o.significant for o in out if o] == list(reject)
    assert any(all(o.significant for o in holm(f) if o) for f in families)
    assert any(not any(o.significant for o in holm(f) if o) for f in families)


def test_bootstrap_p_value_hand_computed() -> None:
    # 9 replicates: 2 at or below 0 (one tie), 8 at or above 0 → 2·min(3, 9)/10
    d = np.array([-0.5, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
    assert bootstrap_p_value(d) == pytest.approx(0.6)
    assert bootstrap_p_value(np.ones(999)) == pytest.approx(2 / 1000)
    assert bootstrap_p_value(np.zeros(50)) == 1.0


def test_stratified_bootstrap_resamples_within_strata() -> None:
    # a macro mean of two strata: each resample keeps one stratum's items in that stratum, so
    # with stratum 2 constant the statistic is (mean of a resample of stratum 1 + 5) / 2
    one, two = np.array([0.0, 1.0, 2.0, 3.0]), np.array([5.0, 5.0, 5.0])

    def macro(idx: list[np.ndarray]) -> np.ndarray:
        return (one[idx[0]].mean(axis=-1) + two[idx[1]].mean(axis=-1)) / 2

    got = stratified_bootstrap([4, 3], macro)
    direct = stats.bootstrap((one, two), lambda a, b, axis: (a.mean(axis) + b.mean(axis)) / 2,
                             paired=False, n_resamples=2000, method="percentile",
                             rng=np.random.default_rng(SEED))
    assert (got.interval.low, got.interval.high) == pytest.approx(
        (direct.confidence_interval.low, direct.confidence_interval.high))
    assert got.distribution is not None and got.distribution.min() >= 2.5
    assert got.distribution.max() <= 4.0 and got.interval.n_items == 7
    same = paired_bootstrap_test([4, 3], macro, macro)
    assert (same.difference, same.p_value, same.test) == (0.0, 1.0, "paired-bootstrap")
