"""Known-answer tests for harness.report.stats (hand-computed values in the comments)."""

import math
import subprocess
import sys
import warnings
from itertools import product

import numpy as np
import pytest
from scipy import stats as sps

from harness.report.stats import (
    PairedComparison,
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
    # Student-t: 2.5 ± t(0.975, 3)·s/√4 = 2.5 ± 3.182446·0.645497 = 2.5 ± 2.054260
    assert s.ci_low == pytest.approx(2.5 - 2.0542603, abs=1e-6)
    assert s.ci_high == pytest.approx(2.5 + 2.0542603, abs=1e-6)
    # the same interval as scipy's own t-interval
    low, high = sps.t.interval(0.95, 3, loc=2.5, scale=sps.sem([1.0, 2.0, 3.0, 4.0]))
    assert (s.ci_low, s.ci_high) == (pytest.approx(low), pytest.approx(high))


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


def test_below_the_minimum_of_seeds_there_is_no_interval_and_no_verdict():
    s = summarize([0.5, 0.9], min_seeds=3)
    assert (s.n, s.mean) == (2, pytest.approx(0.7)) and math.isnan(s.ci_low)
    assert not math.isnan(summarize([0.5, 0.9, 0.7], min_seeds=3).ci_low)
    c = compare_paired([0.9, 0.8], [0.1, 0.2], min_seeds=3)
    assert c.mean_diff == pytest.approx(0.7) and not c.distinguishable
    assert math.isnan(c.diff_ci_low) and math.isnan(c.p_value)
    assert tied_with_best({"a": [0.9, 0.8], "b": [0.1, 0.2]}, min_seeds=3) == ["a", "b"]


# The coverage the module docstring reports: 20,000 seeded draws per cell, fixed, not
# flaky. Each distribution is shifted so its true mean is known exactly.
DISTRIBUTIONS = {
    "normal": (lambda rng, shape: rng.normal(size=shape), 0.0),
    "log-normal 0.25": (lambda rng, shape: rng.lognormal(0.0, 0.25, shape),
                        math.exp(0.25 ** 2 / 2)),
    "student-t 3": (lambda rng, shape: rng.standard_t(3, shape), 0.0),
}


TRIALS = 20_000


@pytest.mark.parametrize("name", DISTRIBUTIONS)
@pytest.mark.parametrize("n", [3, 5, 10])
def test_mean_interval_holds_its_coverage(name, n):
    from harness.report.stats import t_interval

    draw, true_mean = DISTRIBUTIONS[name]
    samples = draw(np.random.default_rng(n), (TRIALS, n))
    low, high = t_interval(samples)
    assert 0.93 <= np.mean((low <= true_mean) & (true_mean <= high)) <= 0.97
    for x in samples[:20]:  # what the tables show is this interval
        s = summarize(x)
        assert (s.ci_low, s.ci_high) == (pytest.approx(t_interval(x)[0]),
                                         pytest.approx(t_interval(x)[1]))


def _paired(draw, n: int, effect: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """TRIALS tables of n seeds: x and y share a large seed effect (its spread cancels in
    the paired differences); x is ``effect`` better."""
    rng = np.random.default_rng(seed)
    seed_effect = rng.normal(0.0, 5.0, (TRIALS, n))
    noise = draw(rng, (2, TRIALS, n))
    return seed_effect + effect + noise[0], seed_effect + noise[1]


@pytest.mark.parametrize("name", DISTRIBUTIONS)
@pytest.mark.parametrize("n", [3, 5, 10])
def test_paired_difference_interval_holds_its_coverage(name, n):
    from harness.report.stats import t_interval

    x, y = _paired(DISTRIBUTIONS[name][0], n, 0.3, seed=100 + n)
    low, high = t_interval(x - y)
    assert 0.93 <= np.mean((low <= 0.3) & (0.3 <= high)) <= 0.97
    for i in range(10):  # what the tables show is this interval
        c = compare_paired(x[i], y[i], n_resamples=9)
        assert (c.diff_ci_low, c.diff_ci_high) == (pytest.approx(low[i]),
                                                   pytest.approx(high[i]))


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_no_true_difference_is_declared_distinguishable_about_5_percent_at_5_seeds(name):
    from harness.report.stats import t_test

    x, y = _paired(DISTRIBUTIONS[name][0], 5, 0.0, seed=7)
    p = t_test(x - y)
    assert np.mean(p < 0.05) <= 0.06
    for i in range(10):  # the verdict the tables show is this test's
        assert compare_paired(x[i], y[i], n_resamples=9).distinguishable == (p[i] < 0.05)


def test_holm_known_values():
    # sorted p: 0.01, 0.02, 0.03, 0.04 scaled by 4, 3, 2, 1 -> 0.04, 0.06, 0.06, 0.04
    # running maximum -> 0.04, 0.06, 0.06, 0.06; back in input order
    from harness.report.stats import holm

    got = holm([0.03, 0.01, 0.04, 0.02])
    assert got == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # 2·0.5 clipped at 1, then max
    with_nan = holm([math.nan, 0.01, 0.02])
    assert math.isnan(with_nan[0]) and with_nan[1:] == pytest.approx([0.02, 0.02])


def test_holm_keeps_the_family_wise_error_rate_when_many_are_compared():
    """14 objectives equal to the reference, 5 seeds: uncorrected, at least one is
    declared different in 40% of tables (1 − 0.95^14 = 51% if the tests were
    independent; they share the reference); Holm keeps it ≤ 5%."""
    from harness.report.stats import holm, holm_adjust, t_test

    rng = np.random.default_rng(11)
    trials = 4_000
    seed_effect = rng.normal(0.0, 5.0, (trials, 1, 5))
    ref = seed_effect[:, 0] + rng.normal(size=(trials, 5))
    others = seed_effect + rng.normal(size=(trials, 14, 5))
    p = t_test(others - ref[:, None])  # (trials, 14)
    raw = np.mean((p < 0.05).any(axis=1))
    corrected = np.mean([(holm(row) < 0.05).any() for row in p])
    assert 0.35 <= raw <= 0.55
    assert corrected <= 0.06
    # holm_adjust applies the same correction to a table's comparisons
    family = {f"o{k}": compare_paired(others[0, k], ref[0], n_resamples=9) for k in range(14)}
    adjusted = holm_adjust(family)
    assert [adjusted[f"o{k}"].p_adjusted for k in range(14)] == pytest.approx(holm(p[0]))


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
    assert c == PairedComparison(5, 0.5, c.prob_ci_low, c.prob_ci_high, 0.0, 0.0, 0.0, False,
                           p_value=1.0, p_adjusted=1.0)


def test_paired_t_known_values():
    # differences 0.1, 0.3, 0.2: mean 0.2, s = 0.1, t = 0.2/(0.1/√3) = 3.4641, 2 d.o.f.
    c = compare_paired([1.1, 2.3, 3.2], [1.0, 2.0, 3.0])
    assert c.mean_diff == pytest.approx(0.2)
    assert c.p_value == pytest.approx(sps.ttest_rel([1.1, 2.3, 3.2], [1.0, 2.0, 3.0]).pvalue)
    assert c.p_value == pytest.approx(0.074180, abs=1e-6)
    half = 4.302653 * 0.1 / math.sqrt(3)  # t(0.975, 2) · s/√n
    assert (c.diff_ci_low, c.diff_ci_high) == (pytest.approx(0.2 - half),
                                               pytest.approx(0.2 + half))
    assert not c.distinguishable  # p = 0.074 > 0.05: the interval contains 0


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
        "import sys, harness.report.stats; "
        "bad = [m for m in ('torch', 'django') if m in sys.modules]; "
        "sys.exit(str(bad) if bad else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- rank intervals ------------------------------------------------------------------


def test_rank_intervals_are_exact_when_the_order_is_certain_and_wide_when_not():
    from harness.report.stats import rank_intervals

    far = {"a": [0.9, 0.91, 0.92], "b": [0.5, 0.51, 0.52], "c": [0.1, 0.11, 0.12]}
    assert rank_intervals(far) == {"a": (1, 1), "b": (2, 2), "c": (3, 3)}
    assert rank_intervals(far, higher_is_better=False) == {"a": (3, 3), "b": (2, 2),
                                                          "c": (1, 1)}
    rng = np.random.default_rng(0)
    close = {"x": rng.normal(0.0, 1.0, 5), "y": rng.normal(0.05, 1.0, 5),
             "z": [10.0, 10.1, 9.9, 10.0, 10.2]}  # x and y swap places; z is always first
    got = rank_intervals(close)
    assert got["z"] == (1, 1)
    assert got["x"] == (2, 3) and got["y"] == (2, 3)
    # different seed counts are fine; one seed has a fixed mean
    assert rank_intervals({"one": [0.5], "many": [0.1, 0.2, 0.3]}) == {"one": (1, 1),
                                                                      "many": (2, 2)}
    assert rank_intervals({}) == {}
    with pytest.raises(ValueError, match="no scores to rank"):
        rank_intervals({"a": []})


def test_rank_intervals_equal_the_pairwise_definition_with_ties():
    """The ranks come from a sort; they must be the definition's integers exactly:
    rank = 1 + the number of strictly better bootstrap means, ties sharing the best place."""
    from harness.report.stats import rank_intervals

    rng = np.random.default_rng(5)
    for trial in range(20):
        k = int(rng.integers(1, 30))
        scores = {f"o{i}": np.round(rng.normal(0.7, 0.05, int(rng.integers(1, 8))), 2)
                  for i in range(k)}  # rounded: many tied means
        higher = bool(trial % 2)
        sign = 1.0 if higher else -1.0
        draw = np.random.default_rng(0)
        means = np.stack([sign * a[draw.integers(0, a.size, (2000, a.size))].mean(axis=1)
                          for a in scores.values()])
        ranks = 1 + (means[None, :, :] > means[:, None, :]).sum(axis=1)
        low = np.floor(np.quantile(ranks, 0.025, axis=1)).astype(int)
        high = np.ceil(np.quantile(ranks, 0.975, axis=1)).astype(int)
        expected = {n: (int(a), int(b)) for n, a, b in zip(scores, low, high, strict=True)}
        assert rank_intervals(scores, higher_is_better=higher) == expected


def test_iqm_and_the_t_interval_equal_scipys_to_the_last_bit():
    rng = np.random.default_rng(6)
    for n in list(range(1, 25)) * 20:
        x = rng.normal(size=n)
        if n % 3 == 0:
            x = np.round(x, 1)  # ties
        assert iqm(x) == float(sps.trim_mean(x, 0.25))
        if n >= 2 and not np.all(x == x[0]):
            s = summarize(x)
            half = sps.t.ppf(0.975, n - 1) * np.std(x, ddof=1) / math.sqrt(n)
            assert (s.ci_low, s.ci_high) == (np.mean(x) - half, np.mean(x) + half)
