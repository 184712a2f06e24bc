"""Known-answer tests for harness.report.sequential (published boundaries, hand-made looks)
and one cheap simulation of the rule's error rate."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from harness.report.sequential import (
    AT_CAP,
    BETTER,
    MORE,
    WORSE,
    Design,
    boundaries,
    calibrated_level,
    decide,
    looks,
    simulate,
    spent,
    z_boundaries,
)

FOUR = Design(start=5, step=5, cap=20)  # looks at t = 1/4, 1/2, 3/4, 1

# gsDesign::gsDesign(k = 4, test.type = 1, alpha = 0.025, sfu = sfLDOF)$upper$bound, the
# Lan–DeMets O'Brien–Fleming-type bounds at equally spaced looks (one side of the
# symmetric two-sided design at α = 0.05; ldbounds gives 4.3326, 2.9631, 2.3590, 2.0141).
GSDESIGN_K4 = [4.332634, 2.963131, 2.359044, 2.014090]
# gsDesign2's gs_b example: the same spending at timing (0.5, 0.75, 1).
GSDESIGN_HALF = [2.962588, 2.359018, 2.014084]


def test_looks():
    assert looks(FOUR) == [5, 10, 15, 20]
    assert looks(Design(3, 1, 6)) == [3, 4, 5, 6]
    assert looks(Design(5, 2, 5)) == [5]  # start == cap: the fixed design


def test_z_boundaries_match_published_values():
    c = z_boundaries(FOUR)
    assert np.round(c, 2).tolist() == [4.33, 2.96, 2.36, 2.01]
    # The two-sided design also excludes paths that left by the lower side earlier, a
    # difference of ~1e-6 here; the recursive integration itself is good to ~1e-8.
    assert c == pytest.approx(GSDESIGN_K4, abs=2e-5)
    assert z_boundaries(Design(10, 5, 20)) == pytest.approx(GSDESIGN_HALF, abs=2e-5)


def test_alpha_spent_is_alpha_at_the_last_look():
    cum = spent(FOUR)
    assert cum[-1] == pytest.approx(0.05, rel=1e-12)
    assert np.all(np.diff(cum) > 0)
    # O'Brien–Fleming type: almost nothing early (2·(2 − 2Φ(2.2414/√0.25)) at t = 1/4)
    assert cum[0] == pytest.approx(4 * sps.norm.sf(sps.norm.isf(0.0125) / 0.5), rel=1e-12)
    assert spent(FOUR, comparisons=5)[-1] == pytest.approx(0.01, rel=1e-12)


def test_boundaries_spend_exactly_by_the_multivariate_normal():
    """An independent check of the recursive integration: P(some |Z_j| >= c_j, j <= k)
    from scipy's multivariate normal (corr √(n_i/n_j)) is the spending function at t_k."""
    ns = np.array(looks(FOUR), dtype=float)
    corr = np.sqrt(np.minimum.outer(ns, ns) / np.maximum.outer(ns, ns))
    c = z_boundaries(FOUR)
    for k in (2, 4):
        mvn = sps.multivariate_normal(np.zeros(k), corr[:k, :k], abseps=1e-7, releps=1e-7,
                                      maxpts=200_000, seed=0)
        crossed = 1 - mvn.cdf(c[:k], lower_limit=-c[:k])
        assert crossed == pytest.approx(spent(FOUR)[k - 1], abs=2e-5)


def test_nominal_p_thresholds():
    p, raw = boundaries(FOUR), boundaries(FOUR, calibrate=False)
    assert raw == pytest.approx(2 * sps.norm.sf(GSDESIGN_K4), rel=1e-3)
    assert raw[-1] == pytest.approx(0.0440, abs=1e-4)  # below α: earlier looks spent some
    # calibrated for the t looks: the z design spends a little less than α
    assert 0.045 < calibrated_level(FOUR) < 0.05
    assert np.all(p < raw) and np.all(np.diff(p) > 0)
    fixed = Design(5, 1, 5)  # one look: the plain paired t-test at α, no calibration
    assert boundaries(fixed).tolist() == pytest.approx([0.05], rel=1e-12)
    assert boundaries(FOUR, comparisons=5)[-1] < p[-1] / 4  # Bonferroni: α/5 per pair


def test_decide_on_hand_made_differences():
    tight = [1.0, 1.01, 0.99, 1.0, 1.0]  # t = 316 with 4 d.o.f.: below even p_1 ≈ 1e-5
    d = decide(tight, FOUR)
    assert (d.verdict, d.n, d.next_n) == (BETTER, 5, None)
    assert decide(-np.array(tight), FOUR).verdict == WORSE
    noisy = [0.5, 1.2, -0.3, 0.9, 0.4]  # p = 0.101
    d = decide(noisy, FOUR)
    assert (d.verdict, d.next_n) == (MORE, 10)
    assert d.p_value == pytest.approx(sps.ttest_1samp(noisy, 0).pvalue)
    assert d.mean_diff == pytest.approx(0.54) and d.threshold == boundaries(FOUR)[0]
    clear = [1.2, 0.4, 2.1, 0.9, 1.6, 0.3, 1.1, 1.8, 0.7, 1.4]  # p = 1.7e-4 < p_2 ≈ 0.0028
    assert decide(clear, FOUR).verdict == BETTER
    # p = 0.0155: a fixed 10-seed test at 5% would call it; the rule asks for 15 seeds
    modest = [0.6, -0.2, 1.1, 0.3, 0.9, -0.4, 0.5, 1.0, 0.2, 0.7]
    assert (decide(modest, FOUR).verdict, decide(modest, FOUR).next_n) == (MORE, 15)
    d = decide(np.zeros(20), FOUR)  # constant zero differences: p = 1
    assert (d.verdict, d.next_n, d.p_value) == (AT_CAP, None, 1.0)
    assert decide(np.full(5, 0.1), FOUR).verdict == BETTER  # exact, noiseless difference


def test_decide_rejects_seed_counts_that_are_not_looks_and_bad_values():
    with pytest.raises(ValueError, match="not a look"):
        decide(np.ones(7), FOUR)
    with pytest.raises(ValueError, match="NaN"):
        decide([1.0, math.nan, 0.5, 0.2, 0.1], FOUR)
    with pytest.raises(ValueError, match="comparisons"):
        decide(np.ones(5), FOUR, comparisons=0)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"start": 1, "step": 1, "cap": 5}, "start must be >= 2"),
    ({"start": 5, "step": 0, "cap": 5}, "step must be >= 1"),
    ({"start": 5, "step": 5, "cap": 4}, "must be >= start"),
    ({"start": 5, "step": 5, "cap": 12}, "start \\+ k·step"),
    ({"start": 5, "step": 5, "cap": 20, "alpha": 0.0}, "alpha must lie in"),
    ({"start": 5, "step": 5, "cap": 20, "alpha": 1.0}, "alpha must lie in"),
    ({"start": 5.0, "step": 5, "cap": 20}, "integers"),
])
def test_bad_designs_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Design(**kwargs)


def test_simulate_refuses_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="dist"):
        simulate(FOUR, 0.0, 1.0, 10, rng, dist="cauchy")
    with pytest.raises(ValueError, match="reps"):
        simulate(FOUR, 0.0, 1.0, 0, rng)


def test_simulated_error_rate_within_nominal_and_seeds_saved():
    reps = 40_000
    r = simulate(FOUR, 0.0, 1.0, reps, np.random.default_rng(1))
    # binomial tolerance: 3 standard errors above nominal (0.23% one-sided, 0.33% both)
    assert r["better"] <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / reps)
    assert r["better"] + r["worse"] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)
    assert r["mean_seeds"] > 19.5  # nothing to find: nearly every run goes to the cap
    r = simulate(FOUR, 2.0, 1.0, 4_000, np.random.default_rng(2))
    # 2σ: always "better", at about half the fixed design's 20 seeds (10.2 in the bench);
    # the first look (t > 26 with 4 d.o.f.) almost never stops such a run
    assert r["better"] == 1.0 and 9.5 < r["mean_seeds"] < 11
    r = simulate(FOUR, 30.0, 1.0, 4_000, np.random.default_rng(3))
    assert r["better"] == 1.0 and r["mean_seeds"] < 5.5  # overwhelming: stops at start
