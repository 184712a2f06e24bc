"""Known-answer tests for the calibration suite's post-hoc calibrators
(suites/calibration/baselines/). Expected values come from hand-written numpy formulas,
hand-computed tiny examples, scipy or scikit-learn, never from the function under test.

The seventh calibrator is spline calibration (Gupta et al. 2021), not BBQ: its reference
code (kartikgupta-at-anu/spline-calibration) pins the whole method down (sorted top-label
scores, cumulative accuracy-minus-score curve, least-squares natural cubic spline with 6
equally spaced knots, its derivative added back to the score), while BBQ's Bayesian model
averaging over binnings comes with priors and pruning choices the paper leaves open.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax
from sklearn.isotonic import IsotonicRegression

from harness.objectives.validate import validate
from suites.calibration import metrics as cal

ALL = ["identity", "temperature", "vector_scaling", "dirichlet_odir", "histogram_binning",
       "isotonic", "spline"]


def hook(name):
    return importlib.import_module(f"suites.calibration.baselines.{name}").posthoc_calibration


def run(name, val_logits, val_targets, test_logits, **kw):
    out = hook(name)(torch.as_tensor(val_logits, dtype=torch.float32),
                     torch.as_tensor(val_targets, dtype=torch.int64),
                     torch.as_tensor(test_logits, dtype=torch.float32), **kw)
    return out.numpy().astype(np.float64)


def run64(name, val_logits, val_targets, test_logits, **kw):
    """As ``run``, float64 inputs: for the known answers computed from the same logits."""
    out = hook(name)(torch.as_tensor(val_logits, dtype=torch.float64),
                     torch.as_tensor(val_targets, dtype=torch.int64),
                     torch.as_tensor(test_logits, dtype=torch.float64), **kw)
    return out.numpy().astype(np.float64)


def sample(rng, probs):
    """One label per row of ``probs``, by inverse CDF."""
    return (rng.random(len(probs))[:, None] > np.cumsum(probs, axis=1)).sum(axis=1).clip(
        0, probs.shape[1] - 1)


def overconfident(n=4000, k=10, seed=0):
    """Validation and test sets: labels drawn from softmax(u) (calibrated), logits 3u."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(2 * n, k)) * 1.5
    y = sample(rng, softmax(u, axis=1))
    z = (3 * u).astype(np.float32)
    return z[:n], y[:n], z[n:], y[n:]


def nll(probs, labels):
    return float(-np.mean(np.log(probs[np.arange(len(labels)), labels])))


SMALL = overconfident(n=500, k=5, seed=1)


# --- the contract, for every calibrator ----------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_returns_probability_rows_deterministically_on_float32(name):
    zv, yv, zt, _ = SMALL
    out = hook(name)(torch.from_numpy(zv), torch.from_numpy(yv), torch.from_numpy(zt))
    assert isinstance(out, torch.Tensor) and out.dtype in (torch.float32, torch.float64)
    p = out.numpy()
    assert p.shape == zt.shape
    assert np.isfinite(p).all() and p.min() >= 0 and p.max() <= 1
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-5)
    again = hook(name)(torch.from_numpy(zv), torch.from_numpy(yv), torch.from_numpy(zt))
    assert torch.equal(out, again)


@pytest.mark.parametrize("name", ALL)
def test_permuting_the_test_rows_permutes_the_output(name):
    zv, yv, zt, _ = SMALL
    perm = np.random.default_rng(2).permutation(len(zt))
    np.testing.assert_allclose(run(name, zv, yv, zt[perm]), run(name, zv, yv, zt)[perm],
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ALL)
def test_permuting_the_validation_rows_changes_nothing(name):
    """The sandbox sends the validation rows in a secret order: the fit must not depend on it
    (beyond the rounding of sums in another order)."""
    zv, yv, zt, _ = SMALL
    perm = np.random.default_rng(3).permutation(len(zv))
    np.testing.assert_allclose(run(name, zv[perm], yv[perm], zt), run(name, zv, yv, zt),
                               rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ALL)
def test_permuting_tied_validation_rows_changes_nothing(name):
    """As above with every validation row five times over, under different labels (ties in
    every score, as saturated confidences give)."""
    zv, _, zt, _ = SMALL
    zv = np.repeat(zv[:100], 5, axis=0)
    yv = np.random.default_rng(4).integers(0, zv.shape[1], len(zv))
    perm = np.random.default_rng(5).permutation(len(zv))
    np.testing.assert_allclose(run(name, zv[perm], yv[perm], zt), run(name, zv, yv, zt),
                               rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ALL)
def test_passes_the_engines_validator(name):
    report = validate(name)
    assert report.ok, report.format()


# --- known answers -------------------------------------------------------------------------


def test_identity_is_the_softmax():
    zv, yv, zt, _ = SMALL
    z = zt.astype(np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(run("identity", zv, yv, zt), e / e.sum(axis=1, keepdims=True),
                               rtol=0, atol=1e-12)


def test_temperature_matches_a_grid_search_and_is_softmax_of_z_over_t():
    zv, yv, zt, _ = overconfident(n=2000, k=10, seed=4)
    zv64, zt64 = zv.astype(np.float64), zt.astype(np.float64)

    def val_nll(t):
        return -np.mean(log_softmax(zv64 / t, axis=1)[np.arange(len(yv)), yv])

    coarse = np.geomspace(0.2, 20.0, 401)  # 1.2% apart, then 2001 points over ±2 of them
    best = coarse[np.argmin([val_nll(t) for t in coarse])]
    fine = np.geomspace(best / 1.0233, best * 1.0233, 2001)  # 2.3e-5 relative spacing
    t_grid = fine[np.argmin([val_nll(t) for t in fine])]
    p = run("temperature", zv, yv, zt)
    # log p_0 − log p_j = (z_0 − z_j) / T for every row and class: read T back
    t_out = np.median((zt64[:, :1] - zt64[:, 1:]) / (np.log(p[:, :1]) - np.log(p[:, 1:])))
    assert t_out == pytest.approx(t_grid, rel=1e-3)
    assert t_out > 2  # logits 3× the calibrated ones
    np.testing.assert_allclose(p, softmax(zt64 / t_out, axis=1), rtol=0, atol=1e-9)


def _vector_problem(seed=5, n=4000):
    rng = np.random.default_rng(seed)
    w_true = np.array([0.5, 0.8, 1.0, 1.5, 2.0])
    b_true = np.array([0.3, -0.2, 0.0, 0.1, -0.2])
    u = rng.normal(size=(n, 5)) * 2.0
    return u, sample(rng, softmax(u * w_true + b_true, axis=1)), w_true, b_true


def test_vector_scaling_recovers_a_known_per_class_scale():
    u, y, w_true, b_true = _vector_problem()
    # Read w, b back from test logits 0 and the unit vectors: log q(e_k)_k − log q(e_k)_j
    # − (log q(0)_k − log q(0)_j) = w_k for any j ≠ k; log q(0) = b + const.
    probe = np.vstack([np.zeros(5), np.eye(5)])
    log_q = np.log(run64("vector_scaling", u, y, probe))
    j = (np.arange(5) + 1) % 5
    w = (log_q[1 + np.arange(5), np.arange(5)] - log_q[1 + np.arange(5), j]
         - (log_q[0, np.arange(5)] - log_q[0, j]))
    np.testing.assert_allclose(w, w_true, rtol=0.1)
    b = log_q[0] - log_q[0].mean()  # noisier than w (sampling error ~0.05 here)
    np.testing.assert_allclose(b, b_true - b_true.mean(), atol=0.2)


def test_vector_scaling_fits_validation_at_least_as_well_as_temperature():
    zv, yv, _, _ = overconfident(n=2000, k=10, seed=6)
    # A calibrator applied to the validation logits themselves gives its training fit.
    vs, ts = run("vector_scaling", zv, yv, zv), run("temperature", zv, yv, zv)
    assert nll(vs, yv) <= nll(ts, yv) + 1e-9
    assert nll(ts, yv) < nll(softmax(zv.astype(np.float64), axis=1), yv)


def _dirichlet_problem(seed=7, n=4000):
    rng = np.random.default_rng(seed)
    k = 4
    u = rng.normal(size=(n, k)) * 2.0
    x = log_softmax(u, axis=1)
    w_true = np.array([[1.5, 0.6, 0.0, 0.0],
                       [0.0, 0.7, 0.8, 0.0],
                       [0.0, 0.0, 1.2, -0.5],
                       [0.4, 0.0, 0.0, 0.9]])
    b_true = np.array([0.2, -0.1, 0.0, 0.3])
    return u, x, sample(rng, softmax(x @ w_true.T + b_true, axis=1)), w_true, b_true


def test_dirichlet_unregularized_is_the_maximum_likelihood_fit_of_a_known_map():
    u, x, y, w_true, b_true = _dirichlet_problem()
    fit = run64("dirichlet_odir", u, y, u, lam=0.0, mu=0.0)
    truth = softmax(x @ w_true.T + b_true, axis=1)
    assert nll(fit, y) <= nll(truth, y) + 1e-9  # the global minimum of a convex NLL
    vs = run64("vector_scaling", u, y, u)
    assert nll(fit, y) < nll(vs, y) - 0.01  # vector scaling cannot mix classes
    # W is identified up to W + 1vᵀ: compare W_i − W_last (and b_i − b_last), read back from
    # K + 1 test rows whose log-softmax are the probes (log-probabilities are their own).
    probes = np.log(np.vstack([np.full(4, 0.25), 0.1 + 0.6 * np.eye(4)]))
    log_q = np.log(run64("dirichlet_odir", u, y, probes, lam=0.0, mu=0.0))
    diff = log_q[:, :-1] - log_q[:, -1:]  # [K + 1, K − 1] = [x, 1] @ [(W_i − W_K), b_i − b_K]ᵀ
    coef = np.linalg.solve(np.hstack([probes, np.ones((5, 1))]), diff)
    np.testing.assert_allclose(coef[:4].T, w_true[:-1] - w_true[-1], atol=0.15)


def test_dirichlet_odir_minimizes_the_papers_regularized_objective():
    """Against scipy's L-BFGS on the objective written out here (penalty normalization
    included), on a small problem where the regularizer matters."""
    rng = np.random.default_rng(8)
    n, k, lam, mu = 300, 3, 2.0, 0.5
    u = rng.normal(size=(n, k)) * 2.0
    x = log_softmax(u, axis=1)
    y = sample(rng, softmax(x @ np.array([[1.2, 0.5, 0], [0, 0.8, 0.4], [0.3, 0, 1.0]]).T
                            + np.array([0.5, -0.5, 0.0]), axis=1))
    off = 1 - np.eye(k)

    def objective(theta):
        w, b = theta[:k * k].reshape(k, k), theta[k * k:]
        log_q = log_softmax(x @ w.T + b, axis=1)
        return (-np.mean(log_q[np.arange(n), y]) + lam / (k * (k - 1)) * np.sum((w * off)**2)
                + mu / k * np.sum(b**2))

    best = minimize(objective, np.concatenate([np.eye(k).ravel(), np.zeros(k)]),
                    method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 5000})
    w, b = best.x[:k * k].reshape(k, k), best.x[k * k:]
    zt = rng.normal(size=(50, k)) * 2.0
    expected = softmax(log_softmax(zt, axis=1) @ w.T + b, axis=1)
    np.testing.assert_allclose(run64("dirichlet_odir", u, y, zt, lam=lam, mu=mu), expected,
                               rtol=0, atol=1e-4)


def test_histogram_binning_hand_computed():
    # K = 2, 3 bins (0, 1/3], (1/3, 2/3], (2/3, 1]; validation p_1 and labels:
    p1 = np.array([0.1, 0.2, 0.25, 0.3, 0.9, 0.95])
    yv = np.array([0, 0, 1, 0, 1, 1])
    # class 1: bin 0 holds samples 0-3 (one labelled 1): 1/4; bin 1 is empty: its centre
    # 1/2; bin 2 holds samples 4, 5 (both 1): 1. Class 0 (p_0 = 1 − p_1): bin 2 holds
    # samples 0-3 (three labelled 0): 3/4; bin 1 empty: 1/2; bin 0 holds 4, 5: 0.
    pt1 = np.array([0.2, 0.5, 0.97, 0.6])
    expected = np.array([[3 / 4, 1 / 4],  # p_1 in bin 0, p_0 = 0.8 in bin 2
                         [1 / 2, 1 / 2],  # both in the empty bin 1
                         [0.0, 1.0],  # p_1 in bin 2, p_0 = 0.03 in bin 0
                         [1 / 2, 1 / 2]])  # p_1 = 0.6 and p_0 = 0.4: both in bin 1

    def logits(p):
        return np.log(np.stack([1 - p, p], axis=1))

    np.testing.assert_allclose(run64("histogram_binning", logits(p1), yv, logits(pt1), bins=3),
                               expected, rtol=0, atol=1e-12)


def test_histogram_binning_all_zero_row_keeps_the_uncalibrated_softmax():
    # K = 3, 3 bins. S1 = (0.5, 0.45, 0.05) labelled 1, S2 = (0.1, 0.1, 0.8) labelled 0.
    pv = np.array([[0.5, 0.45, 0.05], [0.1, 0.1, 0.8]])
    yv = np.array([1, 0])
    # Test (0.5, 0.25, 0.25): class 0 bin 1 = {S1}, not 0: 0; class 1 bin 0 = {S2}, not 1:
    # 0; class 2 bin 0 = {S1}, not 2: 0. All zero: the row stays as it was.
    # Test S2 itself: class 0 bin 0 = {S2}: 1; class 1 bin 0: 0; class 2 bin 2 = {S2}: 0.
    pt = np.array([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]])
    out = run64("histogram_binning", np.log(pv), yv, np.log(pt), bins=3)
    np.testing.assert_allclose(out, [[0.5, 0.25, 0.25], [1.0, 0.0, 0.0]], rtol=0, atol=1e-12)


def test_isotonic_is_sklearn_per_class_renormalized():
    zv, yv, zt, _ = overconfident(n=600, k=4, seed=9)
    pv, pt = softmax(zv.astype(np.float64), axis=1), softmax(zt.astype(np.float64), axis=1)
    fitted = np.stack([
        IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1)
        .fit(pv[:, k], (yv == k).astype(np.float64)).predict(pt[:, k]) for k in range(4)],
        axis=1)
    assert (fitted.sum(axis=1) > 0).all()
    np.testing.assert_allclose(run("isotonic", zv, yv, zt),
                               fitted / fitted.sum(axis=1, keepdims=True), rtol=0, atol=1e-12)


def test_isotonic_all_zero_row_keeps_the_uncalibrated_softmax():
    pv = np.array([[0.8, 0.1, 0.1], [0.5, 0.1, 0.4], [0.4, 0.1, 0.5]])
    yv = np.array([0, 0, 2])
    # Test (0.3, 0.4, 0.3): class 0's fit (0.4 → 0, 0.5 → 1, 0.8 → 1) is clipped to 0 below
    # 0.4; class 1's targets are all 0; class 2's fit is 0 up to 0.4. All zero: the row
    # stays as it was. Test (0.8, 0.1, 0.1): 1, 0, 0.
    pt = np.array([[0.3, 0.4, 0.3], [0.8, 0.1, 0.1]])
    out = run64("isotonic", np.log(pv), yv, np.log(pt))
    np.testing.assert_allclose(out, [[0.3, 0.4, 0.3], [1.0, 0.0, 0.0]], rtol=0, atol=1e-12)


def test_spline_on_a_linear_curve():
    """All N validation predictions right with confidence 0.7: the curve
    (1/N) Σ_{j≤i} (1 − 0.7) = 0.3 i/N is linear in t = (i−1)/(N−1), which a natural spline
    fits exactly, slope 0.3 (N−1)/N; every confidence becomes 0.7 + 0.3 (N−1)/N. A test row
    keeps the order of its classes: softmax(β z), one β per row, top entry that value."""
    n = 50
    zv = np.tile(np.log([0.7, 0.2, 0.1]), (n, 1))
    yv = np.zeros(n, dtype=np.int64)
    zt = np.array([[2.0, 1.0, 0.0], [0.0, 0.5, 3.0], [1.0, -1.0, 0.5]])
    out = run64("spline", zv, yv, zt)
    target = 0.7 + 0.3 * (n - 1) / n
    np.testing.assert_allclose(out.max(axis=1), target, rtol=0, atol=1e-9)
    assert (out.argmax(axis=1) == zt.argmax(axis=1)).all()
    top = zt.argmax(axis=1)[:, None]
    gaps = zt - np.take_along_axis(zt, top, axis=1)
    logs = np.log(out) - np.log(np.take_along_axis(out, top, axis=1))
    beta = logs.sum(axis=1) / gaps.sum(axis=1)
    np.testing.assert_allclose(logs, beta[:, None] * gaps, rtol=0, atol=1e-9)


def test_spline_lowers_held_out_ece_and_keeps_the_predicted_class():
    zv, yv, zt, yt = overconfident(n=3000, k=10, seed=10)
    before = softmax(zt.astype(np.float64), axis=1)
    after = run("spline", zv, yv, zt)
    assert cal.ece(after, yt) < cal.ece(before, yt) / 3
    assert (after.argmax(axis=1) == before.argmax(axis=1)).all()


# --- every calibrator helps on overconfident data ------------------------------------------


def test_every_calibrator_lowers_test_ece_on_overconfident_data():
    zv, yv, zt, yt = overconfident(n=4000, k=10, seed=0)
    base = cal.ece(run("identity", zv, yv, zt), yt)
    assert base > 0.2
    for name in ALL[1:]:
        assert cal.ece(run(name, zv, yv, zt), yt) < base / 2, name
