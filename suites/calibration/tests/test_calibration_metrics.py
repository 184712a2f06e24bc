"""Calibration metrics and temperature scaling (suites/calibration/metrics.py): known answers
worked by hand, and cross-checks against independent implementations (torchmetrics'
MulticlassCalibrationError, scikit-learn's log_loss, a plain LBFGS temperature fit)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import log_loss
from torchmetrics.classification import MulticlassCalibrationError

from suites.calibration import metrics as cal

# Four samples, two classes; confidences 0.9, 0.78, 0.7, 0.55, correct, wrong, correct, wrong.

PROBS = np.array([[0.9, 0.1], [0.78, 0.22], [0.3, 0.7], [0.45, 0.55]])
LABELS = np.array([0, 1, 1, 0])


def test_ece_mce_and_rms_by_hand():
    # 15 bins: every confidence in a bin of its own, so ECE = mean |hit - confidence|
    assert cal.ece(PROBS, LABELS) == pytest.approx((0.1 + 0.78 + 0.3 + 0.55) / 4)
    assert cal.mce(PROBS, LABELS) == pytest.approx(0.78)
    assert cal.ece(PROBS, LABELS, norm="l2") == pytest.approx(
        math.sqrt((0.1**2 + 0.78**2 + 0.3**2 + 0.55**2) / 4))
    # 2 bins: all four in (0.5, 1]: |accuracy 0.5 - mean confidence 0.7325|
    assert cal.ece(PROBS, LABELS, bins=2) == pytest.approx(0.2325)


def test_adaptive_ece_by_hand():
    # 2 equal-mass bins: edges 0.55, 0.78, 0.9 -> {0.55, 0.7, 0.78} and {0.9}
    expected = 3 / 4 * abs(1 / 3 - (0.55 + 0.7 + 0.78) / 3) + 1 / 4 * abs(1 - 0.9)
    assert cal.adaptive_ece(PROBS, LABELS, bins=2) == pytest.approx(expected)


def test_classwise_ece_nll_brier_accuracy_by_hand():
    # class 0: p = .9 .78 .3 .45 against 1 0 0 1; class 1 mirrors it; all in separate bins
    assert cal.classwise_ece(PROBS, LABELS) == pytest.approx(1.73 / 4)
    assert cal.nll(PROBS, LABELS) == pytest.approx(
        -np.mean(np.log([0.9, 0.22, 0.7, 0.45])))
    assert cal.brier(PROBS, LABELS) == pytest.approx((0.02 + 2 * 0.78**2 + 0.18
                                                      + 2 * 0.55**2) / 4)
    assert cal.accuracy(PROBS, LABELS) == 0.5


def test_bins_are_lower_exclusive_and_upper_inclusive():
    values = np.array([0.0, 0.25, 0.25000001, 0.5, 0.75, 1.0])
    assert cal.equal_width_bins(values, 4).tolist() == [0, 0, 1, 1, 2, 3]


def test_perfect_and_uniform_predictions():
    k = 4
    labels = np.arange(8) % k
    onehot = np.eye(k)[labels]
    assert cal.ece(onehot, labels) == 0 and cal.brier(onehot, labels) == 0
    uniform = np.full((8, k), 1 / k)
    assert cal.brier(uniform, labels) == pytest.approx((k - 1) / k)
    assert cal.nll(uniform, labels) == pytest.approx(math.log(k))
    # a confidence of exactly 0 (underflow) still counts: it falls in the first bin
    assert cal.classwise_ece(onehot, labels) == 0


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_top_label_errors_match_torchmetrics(norm, seed):
    gen = np.random.default_rng(seed)
    n, k = 2000, 10
    logits = gen.normal(0, 2.5, (n, k))
    probs = cal.softmax(logits)
    labels = gen.integers(0, k, n)
    # some signal, so that bins differ in accuracy
    labels[: n // 2] = probs[: n // 2].argmax(axis=1)
    reference = MulticlassCalibrationError(num_classes=k, n_bins=15, norm=norm)
    expected = float(reference(torch.from_numpy(probs), torch.from_numpy(labels)))
    assert cal.ece(probs, labels, norm=norm) == pytest.approx(expected, abs=1e-5)


def test_nll_matches_scikit_learn():
    gen = np.random.default_rng(3)
    probs = cal.softmax(gen.normal(0, 3, (500, 7)))
    labels = gen.integers(0, 7, 500)
    assert cal.nll(probs, labels) == pytest.approx(
        log_loss(labels, probs, labels=list(range(7))), rel=1e-9)


def test_temperature_recovers_the_one_that_made_the_labels():
    gen = np.random.default_rng(4)
    logits = gen.normal(0, 3, (20000, 10))
    true_t = 2.0
    p = cal.softmax(logits, true_t)
    labels = (p.cumsum(axis=1) > gen.random((len(p), 1))).argmax(axis=1)
    assert cal.fit_temperature(logits, labels) == pytest.approx(true_t, rel=0.05)


def test_temperature_is_the_nll_minimum_and_agrees_with_lbfgs():
    gen = np.random.default_rng(5)
    logits = gen.normal(0, 4, (3000, 10))
    labels = np.where(gen.random(3000) < 0.6, logits.argmax(axis=1), gen.integers(0, 10, 3000))
    t = cal.fit_temperature(logits, labels)
    at = cal.nll(cal.softmax(logits, t), labels)
    for other in (t * 0.99, t * 1.01):
        assert cal.nll(cal.softmax(logits, other), labels) > at
    # Guo et al.'s way, run to convergence: LBFGS on T, from 1.5
    z, y = torch.from_numpy(logits), torch.from_numpy(labels)
    temperature = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([temperature], lr=0.01, max_iter=2000, tolerance_grad=1e-12,
                            tolerance_change=1e-15)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(z / temperature, y)
        loss.backward()
        return loss

    opt.step(closure)
    assert t == pytest.approx(float(temperature.detach()), rel=1e-3)


@pytest.mark.parametrize("probs,labels,message", [
    (np.ones((3, 2)) / 2, np.array([0, 1]), "must be"),
    (np.ones((3, 2)) / 2, np.array([0, 1, 2]), "labels must be integers in"),
    (np.ones((3, 2)) / 2, np.array([0.0, 1.0, 1.0]), "labels must be integers"),
    (np.ones((0, 2)), np.zeros(0, dtype=int), "N > 0"),
])
def test_bad_input_is_a_clear_error(probs, labels, message):
    with pytest.raises(ValueError, match=message):
        cal.ece(probs, labels)


def test_a_temperature_needs_finite_logits():
    with pytest.raises(ValueError, match="finite"):
        cal.fit_temperature(np.array([[0.0, np.inf]]), np.array([0]))
