"""The membership-inference family PrivLeak is reported for on MUSE
(suites/unlearning/metrics.py): each attack's score by hand or from an independent
computation, each AUC against scikit-learn's, the worst attack picked with its sign."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from suites.unlearning import metrics as m


def test_loss_zlib_and_reference_scores_by_hand():
    import zlib

    lp = np.log([0.5, 0.25, 0.125])  # mean NLL = 2 ln 2
    assert m.loss_score(lp) == pytest.approx(2 * math.log(2))
    text = "the the the the the the"
    assert m.zlib_score(lp, text) == pytest.approx(
        2 * math.log(2) / len(zlib.compress(text.encode("utf-8"))))
    ref = np.log([0.5, 0.5, 0.5])  # the reference finds it easier by ln 2 a token on average
    assert m.reference_score(lp, ref) == pytest.approx(2 * math.log(2) - math.log(2))
    with pytest.raises(ValueError, match="same tokens"):
        m.reference_score(lp, ref[:2])
    with pytest.raises(ValueError, match="non-empty text"):
        m.zlib_score(lp, "")


def test_min_k_plus_plus_standardises_by_the_models_own_distribution():
    """From the full next-token distributions, μ and σ² computed here independently."""
    gen = np.random.default_rng(0)
    logits = gen.normal(size=(10, 7))
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    tokens = gen.integers(0, 7, 10)
    lp = logp[np.arange(10), tokens]
    mu = (np.exp(logp) * logp).sum(1)
    var = (np.exp(logp) * logp ** 2).sum(1) - mu ** 2
    z = np.sort((lp - mu) / np.sqrt(var))
    assert m.min_k_plus_plus_score(lp, mu, var, k=0.4) == pytest.approx(-z[:4].mean())
    # a flat distribution (σ = 0) is clamped, not divided by zero
    assert math.isfinite(m.min_k_plus_plus_score([-1.0], [-1.0], [0.0]))


@pytest.mark.parametrize("attack", ["loss", "zlib", "reference", "min_k_plus_plus"])
def test_each_attacks_auc_is_sklearns_on_its_scores(attack):
    """Members (forget) get lower scores (more likely): AUC under MUSE's orientation is
    1 − sklearn's with members as the positive class ranked by score."""
    gen = np.random.default_rng(1)
    def scores(shift, n):
        out = []
        for _ in range(n):
            lp = -gen.gamma(2.0, 1.0, 12) + shift
            if attack == "loss":
                out.append(m.loss_score(lp))
            elif attack == "zlib":
                out.append(m.zlib_score(lp, "word " * int(gen.integers(3, 9))))
            elif attack == "reference":
                out.append(m.reference_score(lp, -gen.gamma(2.0, 1.0, 12)))
            else:
                out.append(m.min_k_plus_plus_score(lp, np.full(12, -2.0), np.full(12, 1.5)))
        return np.array(out)
    members, others = scores(0.8, 30), scores(0.0, 40)
    labels = np.r_[np.ones(30), np.zeros(40)]
    expected = roc_auc_score(labels, -np.r_[members, others])
    assert m.mia_auc(members, others) == pytest.approx(1 - expected)


def test_the_worst_privleak_is_the_farthest_from_zero_with_its_sign():
    assert m.worst_privleak({"min_k": -12.0, "loss": 30.0, "zlib": -45.0}) == ("zlib", -45.0)
    assert m.worst_privleak({"min_k": math.nan, "loss": 2.0}) == ("loss", 2.0)
    name, value = m.worst_privleak({"min_k": math.nan})
    assert name == "" and math.isnan(value)
