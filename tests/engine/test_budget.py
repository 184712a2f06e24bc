"""The expected best validation score at each budget (Dodge et al. 2019) against brute
force: every ordered draw of n trials out of k, with replacement, enumerated."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from harness.report.budget import expected_best, max_probabilities

SCORES = [0.62, 0.70, 0.55, 0.70, 0.81]  # a tie on purpose


@pytest.mark.parametrize("higher", [True, False])
def test_the_curve_is_the_mean_and_spread_of_the_best_of_n_draws(higher):
    curve = expected_best(SCORES, higher_is_better=higher)
    best = max if higher else min
    for n in range(1, len(SCORES) + 1):
        draws = [best(t) for t in itertools.product(SCORES, repeat=n)]  # k**n, equally likely
        assert curve.mean[n - 1] == pytest.approx(np.mean(draws), abs=1e-12)
        assert curve.sd[n - 1] == pytest.approx(np.std(draws), abs=1e-12)
    # one trial: the plain mean; more trials: towards the best observed, never past it
    assert curve.mean[0] == pytest.approx(np.mean(SCORES))
    assert (np.diff(curve.mean) >= 0).all() if higher else (np.diff(curve.mean) <= 0).all()
    assert (curve.low >= min(SCORES) - 1e-12).all() and (curve.high <= max(SCORES) + 1e-12).all()
    assert (curve.low <= curve.mean).all() and (curve.mean <= curve.high).all()


def test_the_probabilities_of_the_maximum_sum_to_one():
    p = max_probabilities(8, 3)
    assert p.sum() == pytest.approx(1.0) and (np.diff(p) > 0).all()
    assert max_probabilities(4, 1) == pytest.approx([0.25] * 4)


@pytest.mark.parametrize("scores, message", [
    ([], "non-empty"), ([[0.1, 0.2]], "1-D"), ([0.5, float("nan")], "finite")])
def test_bad_scores_are_refused(scores, message):
    with pytest.raises(ValueError, match=message):
        expected_best(scores)
    with pytest.raises(ValueError, match="k >= 1"):
        max_probabilities(0, 1)
