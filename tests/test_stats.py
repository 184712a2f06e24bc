"""Known-answer tests for harness.stats (hand-computed values in the comments)."""

import math
import subprocess
import sys
import warnings
from itertools import product

import numpy as np
import pytest
from scipy import stats as sps

from harness.stats import (
    Comparison,
    Summary,
    _paired_statistics,  # the bootstrap replicate statistic
    compare_paired,
    iqm,
    mean_ranks,
    probability_of_improvement,
    summarize,
    tied_with_best,
)

# Large between-seed spread, shared by two objectives evaluated on the same seeds.
SPREAD = np.array([0.1, 0.5, 0.9, 0.3, 0.7])


# --- summarize / iqm -------------------------------------------------------------


def test_summarize_known_values():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert s.n == 4
    assert s.mean == 2.5
    # squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, ddof=1 -> 5/3
    assert s.std == pytest.approx(math.sqrt(5 / 3))
    assert s.iqm == 2.5  # int(0.25*4) = 1 trimmed per end -> mean(2, 3)
    assert s.ci_low < s.mean < s.ci_high
    assert 1.0 <= s.ci_low and s.ci_high <= 4.0  # a mean of resamples stays in the range


def test_iqm_known_values():
    assert iqm(np.arange(1, 9)) == 4.5  # middle four of 1..8: (3+4+5+6)/4
    assert iqm([8, 1, 7, 2, 6, 3, 5, 4]) == 4.5  # order does not matter
    assert iqm([1, 2, 3, 4, 100]) == 3.0  # int(1.25) = 1 trimmed per end: mean(2, 3, 4)
    assert iqm([5.0]) == 5.0
    assert math.isnan(iqm([]))


def test_summarize_empty_and_single_seed():
    s0 = summarize([])
    assert s0.n == 0
    assert all(math.isnan(v) for v in (s0.mean, s0.std, s0.ci_low, s0.ci_high, s0.iqm))
    s1 = summarize([0.7])
    assert (s1.n, s1.mean, s1.iqm) == (1, 0.7, 0.7)
    # one seed has no spread: no std and no CI, rather than a falsely certain (v, v)
    assert math.isnan(s1.std) and math.isnan(s1.ci_low) and math.isnan(s1.ci_high)


def test_constant_data_zero_width_ci_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = summarize([0.1] * 7)  # 0.1 * 7 / 7 != 0.1 in floating point
        c = compare_paired([0.3] * 4, [0.3] * 4)
    assert s == Summary(n=7, mean=0.1, std=0.0, ci_low=0.1, ci_high=0.1, iqm=0.1)
    assert (c.mean_diff, c.diff_ci_low, c.diff_ci_high) == (0.0, 0.0, 0.0)
    assert c.prob_improvement == 0.5 and not c.distinguishable


def test_ci_contains_mean_and_narrows_with_n():
    rng = np.random.default_rng(1)
    small = summarize(rng.normal(0.0, 1.0, size=5))
    large = summarize(rng.normal(0.0, 1.0, size=100))
    for s in (small, large):
        assert s.ci_low < s.mean < s.ci_high
    assert large.ci_high - large.ci_low < 0.5 * (small.ci_high - small.ci_low)


def test_ci_is_deterministic_for_a_fixed_seed():
    values = [0.81, 0.84, 0.79, 0.88, 0.83, 0.80]
    assert summarize(values) == summarize(values)
    assert summarize(values, seed=3) == summarize(list(values), seed=3)
    assert summarize(values, seed=1) != summarize(values, seed=2)


def test_ci_coverage_of_true_mean():
    """Percentile bootstrap of the mean at n=10: roughly 90% actual coverage for 95%.

    It uses the plug-in spread (ddof=0) and normal-like quantiles instead of
    Student-t, so it undercovers at small n; 0.85 is the honest lower bound. The
    simulation is seeded, so the result is fixed, not flaky.
    """
    rng = np.random.default_rng(12345)
    true_mean, trials = 1.0, 300
    covered = 0
    for i in range(trials):
        s = summarize(rng.normal(true_mean, 2.0, size=10), n_resamples=1000, seed=i)
        covered += s.ci_low <= true_mean <= s.ci_high
    assert 0.85 <= covered / trials <= 0.99


def test_confidence_level_widens_interval():
    values = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    s80, s99 = summarize(values, confidence=0.8), summarize(values, confidence=0.99)
    assert s99.ci_low < s80.ci_low and s80.ci_high < s99.ci_high


# --- probability of improvement ----------------------------------------------------


def test_probability_of_improvement_known_values():
    # pairs with 1: 0; with 2: three ties = 1.5; with 3: 3 wins -> (0 + 1.5 + 3) / 9
    assert probability_of_improvement([1, 2, 3], [2, 2, 2]) == 0.5
    assert probability_of_improvement([4, 5, 6], [1, 2, 3]) == 1.0
    assert probability_of_improvement([1, 2, 3], [4, 5, 6]) == 0.0
    assert probability_of_improvement([1, 2, 3], [1, 2, 3]) == 0.5
    assert probability_of_improvement([1, 3], [2]) == 0.5  # lengths may differ
    assert probability_of_improvement([3], [1, 2, 3]) == pytest.approx(2.5 / 3)
    assert math.isnan(probability_of_improvement([], [1.0]))


def test_probability_of_improvement_matches_all_pairs_definition():
    rng = np.random.default_rng(7)
    x, y = rng.integers(0, 5, size=9), rng.integers(0, 5, size=6)  # many ties
    brute = np.mean([(a > b) + 0.5 * (a == b) for a, b in product(x, y)])
    assert probability_of_improvement(x, y) == pytest.approx(brute)
    u = sps.mannwhitneyu(x, y).statistic
    assert probability_of_improvement(x, y) == pytest.approx(u / (x.size * y.size))


# --- compare_paired ----------------------------------------------------------------


def test_compare_paired_sees_small_effect_under_large_seed_spread():
    y = SPREAD
    x = y + 0.01  # every seed improves by 0.01
    c = compare_paired(x, y)
    assert c.n_pairs == 5
    assert c.mean_diff == pytest.approx(0.01, abs=1e-12)
    assert c.diff_ci_low == pytest.approx(0.01, abs=1e-12)
    assert c.diff_ci_high == pytest.approx(0.01, abs=1e-12)
    assert c.distinguishable
    # x_i > y_j iff y_i >= y_j (spacing 0.2): 5 diagonal + 10 off-diagonal of 25 pairs
    assert c.prob_improvement == pytest.approx(0.6)
    assert 0.0 <= c.prob_ci_low < c.prob_improvement < c.prob_ci_high <= 1.0

    # An unpaired analysis cannot see it: the per-objective CIs overlap almost fully
    sx, sy = summarize(x), summarize(y)
    overlap = min(sx.ci_high, sy.ci_high) - max(sx.ci_low, sy.ci_low)
    assert overlap > 0.9 * (sy.ci_high - sy.ci_low)
    # and an unpaired bootstrap of the difference of means straddles 0.
    unpaired = sps.bootstrap(
        (x, y),
        lambda a, b, axis=-1: a.mean(axis) - b.mean(axis),
        method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval
    assert unpaired.low < 0 < unpaired.high


def test_compare_paired_noisy_improvement_ci():
    y = SPREAD
    x = y + np.array([0.02, 0.00, 0.03, 0.01, 0.04])  # diffs mean 0.02, all >= 0
    c = compare_paired(x, y)
    assert c.mean_diff == pytest.approx(0.02)
    assert 0.0 <= c.diff_ci_low < 0.02 < c.diff_ci_high <= 0.04
    assert c.distinguishable == (c.diff_ci_low > 0)


def test_compare_paired_lower_is_better_sign_convention():
    y = SPREAD
    x = y - 0.01  # lower loss on every seed: x is better
    c = compare_paired(x, y, higher_is_better=False)
    assert c.mean_diff == pytest.approx(0.01)
    assert c.prob_improvement == pytest.approx(0.6)
    assert c.distinguishable
    r = compare_paired(y, x, higher_is_better=False)
    assert r.mean_diff == pytest.approx(-0.01)
    assert r.prob_improvement == pytest.approx(0.4)
    assert r.diff_ci_high < 0 and r.distinguishable


def test_compare_paired_identical_is_not_distinguishable():
    c = compare_paired(SPREAD, SPREAD.copy())
    assert c == Comparison(5, 0.5, c.prob_ci_low, c.prob_ci_high, 0.0, 0.0, 0.0, False)


def test_compare_paired_tiny_inputs():
    c1 = compare_paired([0.9], [0.1])
    assert (c1.n_pairs, c1.prob_improvement, c1.mean_diff) == (1, 1.0, pytest.approx(0.8))
    assert math.isnan(c1.diff_ci_low) and not c1.distinguishable
    c0 = compare_paired([], [])
    assert c0.n_pairs == 0 and math.isnan(c0.prob_improvement) and not c0.distinguishable


def test_paired_poi_replicates_are_unbiased_over_all_resamples():
    # Enumerate all 3**3 paired resamples of 3 seeds: the replicate PoI must average
    # to the point estimate. Counting same-position pairs would average 0.7778 here.
    y = np.array([0.1, 0.5, 0.9])
    x = y + 0.01  # PoI = (3 same-seed wins + 3 cross-seed wins) / 9 = 2/3
    idx = np.array(list(product(range(3), repeat=3)))  # (27, 3)
    replicates = _paired_statistics(x[idx], y[idx])  # (2, 27)
    assert probability_of_improvement(x, y) == pytest.approx(2 / 3)
    assert replicates[0].mean() == pytest.approx(2 / 3)
    assert replicates[1] == pytest.approx(np.full(27, 0.01))


def test_paired_poi_ci_contains_point_estimate():
    rng = np.random.default_rng(0)
    y = rng.normal(size=10)
    c = compare_paired(y + 0.01, y)
    assert c.prob_improvement == pytest.approx(0.55)  # 10 same-seed + 45 cross-seed wins
    assert c.prob_ci_low < c.prob_improvement < c.prob_ci_high


def test_compare_paired_is_deterministic():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=8), rng.normal(size=8)
    assert compare_paired(x, y, seed=5) == compare_paired(x, y, seed=5)


# --- tied_with_best ----------------------------------------------------------------


def test_tied_with_best_clear_winner_and_tie():
    best = np.array([0.5, 0.6, 0.7, 0.8, 0.9])
    scores = {
        "loser": best - 0.3 + np.array([0.01, -0.01, 0.0, 0.02, -0.02]),
        "tie": best + np.array([0.01, -0.02, 0.02, -0.02, 0.0]),  # mean 0.002 below best
        "best": best,
    }
    assert tied_with_best(scores) == ["best", "tie"]
    negated = {k: -v for k, v in scores.items()}
    assert tied_with_best(negated, higher_is_better=False) == ["best", "tie"]
    assert tied_with_best({"only": [1.0, 2.0]}) == ["only"]
    assert tied_with_best({}) == []


def test_tied_with_best_all_distinct():
    scores = {"a": SPREAD, "b": SPREAD + 0.1, "c": SPREAD + 0.2}
    assert tied_with_best(scores) == ["c"]
    assert tied_with_best(scores, higher_is_better=False) == ["a"]


# --- mean_ranks --------------------------------------------------------------------


def test_mean_ranks_with_ties_and_missing_columns():
    table = {
        "a": {"t1": 0.9, "t2": 0.5, "t3": 0.7},
        "b": {"t1": 0.9, "t2": 0.6},  # no t3: ranked over t1, t2 only
        "c": {"t1": 0.1, "t2": 0.6, "t3": 0.8},
    }
    # t1: a=b tie for 1-2 -> 1.5 each, c 3; t2: b=c -> 1.5, a 3; t3: c 1, a 2
    ranks = mean_ranks(table)
    assert list(ranks) == ["a", "b", "c"]
    assert ranks["a"] == pytest.approx((1.5 + 3 + 2) / 3)
    assert ranks["b"] == pytest.approx(1.5)
    assert ranks["c"] == pytest.approx((3 + 1.5 + 1) / 3)
    # lower is better: t1: c 1, a=b 2.5; t2: a 1, b=c 2.5; t3: a 1, c 2
    low = mean_ranks(table, higher_is_better=False)
    assert low["a"] == pytest.approx((2.5 + 1 + 1) / 3)
    assert low["b"] == pytest.approx(2.5)
    assert low["c"] == pytest.approx((1 + 2.5 + 2) / 3)


def test_mean_ranks_nan_is_missing():
    ranks = mean_ranks({"a": {"t": 1.0}, "b": {"t": float("nan")}, "c": {}})
    assert ranks["a"] == 1.0
    assert math.isnan(ranks["b"]) and math.isnan(ranks["c"])


# --- errors ------------------------------------------------------------------------


def test_nan_input_is_an_error():
    with pytest.raises(ValueError, match=r"values contains 1 NaN/inf of 3 entries; drop diverged"):
        summarize([0.1, float("nan"), 0.3])
    with pytest.raises(ValueError, match=r"y contains 1 NaN/inf of 2 entries"):
        compare_paired([0.1, 0.2], [0.1, float("inf")])
    with pytest.raises(ValueError, match=r"x contains 1 NaN/inf"):
        probability_of_improvement([float("nan")], [0.1])
    with pytest.raises(ValueError, match=r"focal contains 1 NaN/inf"):
        tied_with_best({"ce": [0.1, 0.2], "focal": [0.3, float("nan")]})


def test_mismatched_lengths_are_an_error():
    with pytest.raises(ValueError, match=r"got len\(x\)=3 and len\(y\)=4"):
        compare_paired([0.1, 0.2, 0.3], [0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match=r"got lengths \{'ce': 3, 'focal': 2\}"):
        tied_with_best({"ce": [0.1, 0.2, 0.3], "focal": [0.3, 0.4]})


def test_non_1d_input_is_an_error():
    with pytest.raises(ValueError, match=r"1-D array of per-seed scores, got shape \(2, 2\)"):
        summarize([[1.0, 2.0], [3.0, 4.0]])


def test_stats_imports_neither_torch_nor_django():
    code = (
        "import sys, harness.stats; "
        "bad = [m for m in ('torch', 'django') if m in sys.modules]; "
        "sys.exit(str(bad) if bad else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
