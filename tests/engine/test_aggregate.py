"""The cross-suite aggregate (harness/report/aggregate.py): known answers from scipy's
trim_mean (rliable's IQM), an independent loop for the stratified bootstrap, ranks and ties."""

import numpy as np
import pytest
from scipy import stats as sps

from harness.report.aggregate import aggregate, aggregates, ranked
from harness.report.stats import iqm_rows

RNG = np.random.default_rng(7)
NOISY = {"clean": RNG.normal(0.9, 0.02, 5), "sym-0.4": RNG.normal(0.7, 0.05, 5),
         "asym-0.4": np.array([0.2, 0.65, 0.66, 0.7, 0.71])}  # one diverged seed
CERT = {"eps-0.1": RNG.normal(0.4, 0.03, 5)}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 15, 16])
def test_iqm_is_scipys_trim_mean_of_a_quarter(n):
    x = RNG.normal(size=(3, n))
    assert np.allclose(iqm_rows(x), sps.trim_mean(x, 0.25, axis=1))


def test_a_suite_scores_the_iqm_over_variants_and_seeds_and_suites_count_once():
    agg = aggregate({"noisy-labels": NOISY, "certified": CERT})
    noisy = sps.trim_mean(np.concatenate(list(NOISY.values())), 0.25)
    cert = sps.trim_mean(CERT["eps-0.1"], 0.25)
    assert agg.suites == pytest.approx({"noisy-labels": noisy, "certified": cert})
    assert agg.score == pytest.approx((noisy + cert) / 2)  # not pooled: 3 variants vs 1
    assert agg.seeds == 20
    assert agg.ci_low < agg.score < agg.ci_high


def test_the_interval_is_a_stratified_percentile_bootstrap():
    """An independent loop: per replicate, each (suite, variant) resamples its own seeds."""
    scores = {"noisy-labels": NOISY, "certified": CERT}
    agg = aggregate(scores, replicates=4000, seed=1)
    rng = np.random.default_rng(123)
    reps = []
    for _ in range(4000):
        suite_scores = []
        for variants in scores.values():
            pooled = np.concatenate([rng.choice(x, size=x.size) for x in variants.values()])
            suite_scores.append(sps.trim_mean(pooled, 0.25))
        reps.append(np.mean(suite_scores))
    low, high = np.quantile(reps, [0.025, 0.975])
    width = high - low
    assert agg.ci_low == pytest.approx(low, abs=0.05 * width)
    assert agg.ci_high == pytest.approx(high, abs=0.05 * width)


def test_constant_seeds_give_a_point_interval():
    agg = aggregate({"s": {"v": [0.5] * 5}})
    assert (agg.score, agg.ci_low, agg.ci_high) == (0.5, 0.5, 0.5)


def test_ranks_intervals_and_ties():
    base = RNG.normal(0, 0.05, 5)
    objectives = {"good": {"s": {"v": 0.9 + base}},
                  "twin": {"s": {"v": 0.9 + base[::-1] + 1e-3}},  # the same seeds shuffled
                  "bad": {"s": {"v": 0.3 + base}}}
    rows = ranked(objectives)
    by = {r.name: r for r in rows}
    assert [r.name for r in rows] == ["twin", "good", "bad"]
    assert [r.rank for r in rows] == [1, 2, 3]
    assert by["twin"].tie_group == by["good"].tie_group == 1  # 0.001 apart: not resolved
    assert by["bad"].tie_group == 2
    assert (by["bad"].rank_low, by["bad"].rank_high) == (3, 3)
    assert (by["good"].rank_low, by["good"].rank_high) == (1, 2)


def test_paired_seeds_resample_together():
    """Two objectives with the same seeds and a constant difference keep that difference in
    every replicate: the joint bootstrap never mixes seed 0 of one with seed 3 of the other."""
    x = RNG.normal(0.5, 0.2, 8)
    found = aggregates({"a": {"s": {"v": x}}, "b": {"s": {"v": x + 0.1}}})
    assert np.allclose(found["b"][1] - found["a"][1], 0.1)


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="same suites and variants"):
        aggregates({"a": {"s": {"v": [1.0]}}, "b": {"t": {"v": [1.0]}}})
    with pytest.raises(ValueError, match="finite score"):
        aggregate({"s": {"v": [1.0, float("nan")]}})
    with pytest.raises(ValueError, match="no scores"):
        aggregate({})
