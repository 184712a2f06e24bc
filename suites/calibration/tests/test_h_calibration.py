"""Tests of the h-calibration post-hoc calibrator (calibration suite baseline
``h_calibration``): its output is a probability table, deterministic; its loss and map give
hand-computed values on tiny examples; it beats the uncalibrated softmax on overconfident
synthetic logits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from suites.calibration import metrics as cal
from suites.calibration.baselines.h_calibration import (
    _cluster_ids,
    _hcalibration_loss,
    _moving_mean,
    _pw_map,
    _subloss,
    posthoc_calibration,
)

F64 = torch.float64


def small_problem(n=300, m=50, k=4, seed=1):
    gen = torch.Generator().manual_seed(seed)
    val, test = 4 * torch.randn(n, k, generator=gen), 4 * torch.randn(m, k, generator=gen)
    return val, torch.randint(0, k, (n,), generator=gen), test


def test_output_is_a_deterministic_probability_table():
    val, y, test = small_problem()
    out = posthoc_calibration(val, y, test, steps=10)
    assert out.shape == (50, 4) and out.dtype.is_floating_point
    assert torch.isfinite(out).all() and (out >= 0).all() and (out <= 1).all()
    torch.testing.assert_close(out.sum(1), torch.ones(50, dtype=out.dtype), rtol=0, atol=1e-12)
    torch.testing.assert_close(posthoc_calibration(val, y, test, steps=10), out, rtol=0, atol=0)
    assert torch.equal(out.argmax(1), test.argmax(1))  # one segment: a temperature


@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_defaults_on_small_and_confident_inputs(scale):
    val, y, test = small_problem(n=64, m=1, k=5)
    out = posthoc_calibration(val * scale, y, test * scale)
    assert out.shape == (1, 5) and torch.isfinite(out).all()
    assert abs(out.sum().item() - 1) < 1e-12


def test_validator_smoke_test_passes():
    from harness.contract import registry
    from harness.objectives.validate import validate

    if "h_calibration" not in registry.builtins():
        pytest.skip("the calibration suite is not registered")
    report = validate("h_calibration")
    assert not [p for p in report.problems if p.severity == "error"], report.format()


def test_odd_window_is_refused():
    val, y, test = small_problem()
    with pytest.raises(ValueError, match="veclen must be even"):
        posthoc_calibration(val, y, test, veclen=3)


# --- the loss, by hand -----------------------------------------------------------------


def test_loss_known_answer_three_samples_two_classes():
    """Class 0 left out: row 2 alone, events (p, y) = (0.3, 0), (0.7, 1); zero-padded by 1,
    windows of 3: means of p(1-y) are 0.1, 0.1 and of (1-p)y 0.1, 0.1: no error.
    Class 1 left out: rows 0 and 1, sorted (0.1, 0), (0.4, 0), (0.6, 1), (0.9, 1):
    p(1-y) = .1 .4 0 0 and (1-p)y = 0 0 .4 .1, window sums .5 .5 .4 0 and 0 .4 .5 .5, so
    |gaps| = (.5, .1, .1, .5) / 3; one cluster: 0.4 / (4 + 1e-5). Mean over the two."""
    probs = torch.tensor([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]], dtype=F64)
    y = torch.tensor([0, 0, 1])
    one = 0.4 / (4 + 1e-5) / 2
    kw = {"veclen": 2, "clusters": 1}
    torch.testing.assert_close(_hcalibration_loss(probs, y, lossweight=1.0, **kw),
                               torch.tensor(one, dtype=F64), rtol=1e-12, atol=0)
    torch.testing.assert_close(_hcalibration_loss(probs, y, **kw),  # lossweight 1e5
                               torch.tensor(1e5 * one, dtype=F64), rtol=1e-12, atol=0)
    # epsilon 0.05 clips the gaps: (0.5/3 - 0.05) twice, the 0.1/3 ones to 0
    clipped = 2 * (0.5 / 3 - 0.05) / (4 + 1e-5) / 2
    torch.testing.assert_close(_hcalibration_loss(probs, y, lossweight=1.0, epsilon=0.05, **kw),
                               torch.tensor(clipped, dtype=F64), rtol=1e-12, atol=0)


def test_loss_sorts_events_and_ignores_row_order():
    probs = torch.tensor([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]], dtype=F64)
    y = torch.tensor([0, 0, 1])
    perm = torch.tensor([2, 0, 1])
    kw = {"veclen": 2, "clusters": 1}
    torch.testing.assert_close(_hcalibration_loss(probs[perm], y[perm], **kw),
                               _hcalibration_loss(probs, y, **kw))


def test_subloss_averages_over_clusters_not_events():
    """Six sorted events, two clear clusters of p (4 low, 2 high). p(1-y) = .01 .02 0 .04 0
    0 and (1-p)y = 0 0 .97 0 .03 .01; zero-padded by 1, window-3 sums .03 .03 .06 .04 .04 0
    and 0 .97 .97 1 .04 .04, so 3|gap| = .03 .94 .91 .96 0 .04. Cluster means
    (.03+.94+.91+.96)/3/(4 + 1e-5) and (0+.04)/3/(2 + 1e-5); the loss is their mean, not
    the plain mean of the six errors."""
    p = torch.tensor([0.01, 0.02, 0.03, 0.04, 0.97, 0.99], dtype=F64)
    y = torch.tensor([0.0, 0.0, 1.0, 0.0, 1.0, 1.0], dtype=F64)
    gaps3 = np.array([0.03, 0.94, 0.91, 0.96, 0.0, 0.04])
    assert _cluster_ids(p.numpy(), 2, 0).tolist() == [0, 0, 0, 0, 1, 1]
    low, high = gaps3[:4].sum() / 3 / (4 + 1e-5), gaps3[4:].sum() / 3 / (2 + 1e-5)
    out = _subloss(p, y, epsilon=1e-20, veclen=2, clusters=2, seed=0)
    torch.testing.assert_close(out, torch.tensor((low + high) / 2, dtype=F64), rtol=1e-10,
                               atol=0)
    assert abs(out.item() - gaps3.mean() / 3) > 0.01


def test_moving_mean_is_the_zero_padded_window_mean():
    x = torch.arange(1.0, 8.0, dtype=F64)
    padded = np.concatenate([np.zeros(2), x.numpy(), np.zeros(2)])
    expected = [padded[i:i + 5].mean() for i in range(7)]
    torch.testing.assert_close(_moving_mean(x, 4), torch.tensor(expected, dtype=F64))


def test_cluster_ids_are_deterministic_and_cover_the_values():
    values = np.random.default_rng(0).beta(0.3, 2.0, 36000)
    ids = _cluster_ids(values, 15, 0)
    assert np.array_equal(ids, _cluster_ids(values, 15, 0))
    assert sorted(set(ids.tolist())) == list(range(15))
    order = np.argsort(values)  # 1-D nearest centroid: clusters are intervals of p
    assert np.all(np.diff(ids[order]) >= 0)
    assert _cluster_ids(np.full(10, 0.5), 15, 0).tolist() == [0] * 10


# --- the map, by hand ------------------------------------------------------------------


def test_map_known_answer():
    """10 segments of width 10; u = -log p = 25 has grid points 0, 10, 20 below it and
    u + 10 = 35 has 0 to 30: V1 = 10 (s0 + s1 + s2 - 1), V2 = 10 (s0 + ... + s3 - 1);
    the output is -(V1 + (V2 - V1) / 10 * (25 - V1))."""
    s = torch.tensor([0.5, 2.0, 1.5, 0.25, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], dtype=F64)
    v1, v2 = 10 * (0.5 + 2.0 + 1.5 - 1), 10 * (0.5 + 2.0 + 1.5 + 0.25 - 1)
    expected = -(v1 + (v2 - v1) / 10 * (25 - v1))
    out = _pw_map(torch.tensor([[-25.0]], dtype=F64), -s)  # |s|: the sign is ignored
    torch.testing.assert_close(out, torch.tensor([[expected]], dtype=F64))


def test_map_is_the_identity_at_init_and_a_temperature_with_one_segment():
    log_p = torch.log_softmax(5 * torch.randn(20, 6, dtype=F64), -1)
    for segments in (1, 10, 500):
        torch.testing.assert_close(_pw_map(log_p, torch.ones(segments + 1, dtype=F64)), log_p)
    mapped = _pw_map(log_p, torch.tensor([1.7, 0.4], dtype=F64))
    torch.testing.assert_close(mapped.softmax(-1), (0.4 * log_p).softmax(-1))


# --- overconfident synthetic data ------------------------------------------------------


def test_beats_the_uncalibrated_softmax_on_overconfident_logits():
    rng = np.random.default_rng(0)
    n = m = 4000
    calibrated = rng.normal(0.0, 1.5, (n + m, 10))
    p = cal.softmax(calibrated)
    labels = (p.cumsum(1) > rng.random((n + m, 1))).argmax(1)  # y ~ calibrated p
    logits = torch.from_numpy(3 * calibrated)
    before = cal.ece(cal.softmax(3 * calibrated[n:]), labels[n:])
    probs = posthoc_calibration(logits[:n].float(), torch.from_numpy(labels[:n]),
                                logits[n:].float()).numpy()
    after = cal.ece(probs, labels[n:])
    assert before > 0.3 and after < 0.05 and after < before
    assert cal.accuracy(probs, labels[n:]) == cal.accuracy(cal.softmax(3 * calibrated[n:]),
                                                          labels[n:])
