"""Spline calibration of the top-label confidence (Gupta et al. 2021, "Calibration of neural
networks using splines"): a cubic spline fitted to the cumulative accuracy-minus-confidence
curve, whose slope is the recalibration.

Search space: knots in {3, ..., 10} (int; range ours around the reference's 6).
"""

import numpy as np
import torch
from scipy.interpolate import CubicSpline
from scipy.special import log_softmax, softmax

SEARCH_SPACE = {
    "knots": {"low": 3, "high": 10},
}


def _basis(knots: np.ndarray, t: np.ndarray, nu: int) -> np.ndarray:
    """[len(t), len(knots)]: the natural cubic spline through each unit knot vector (or its
    derivative, nu = 1) at t; a natural spline is these columns times its knot values."""
    return CubicSpline(knots, np.eye(len(knots)), bc_type="natural")(t, nu)


def _scale_to_top(z: np.ndarray, p_top: np.ndarray, steps: int = 100) -> np.ndarray:
    """softmax(β z) row-wise, β ≥ 0 per row with ``max softmax(β z) = p_top``: bisection on
    ``Σ_j exp(−β (max z − z_j)) = 1/p_top``, decreasing in β, from [0, an upper bound]."""
    k = z.shape[1]
    p_top = np.clip(p_top, 1.0 / k + 1e-6, 1 - 1e-12)
    gap = z.max(axis=1, keepdims=True) - z
    smallest = np.where(gap > 0, gap, np.inf).min(axis=1)  # inf: all logits equal
    hi = np.log(np.maximum((k - 1) * p_top / (1 - p_top), 1.0)) / smallest
    lo = np.zeros_like(hi)
    for _ in range(steps):
        mid = (lo + hi) / 2
        above = np.exp(-mid[:, None] * gap).sum(axis=1) > 1 / p_top  # top still too small
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return np.exp(log_softmax(hi[:, None] * z, axis=1))


def posthoc_calibration(val_logits: torch.Tensor, val_targets: torch.Tensor,
                        test_logits: torch.Tensor, *, knots: int = 6) -> torch.Tensor:
    """Sort the N validation samples by top confidence s = max_k softmax(z)_k (ties: misses
    first); at t_i = (i−1)/(N−1) the curve is ``(1/N) Σ_{j≤i} (1[ŷ_j = y_j] − s_j)``. A
    natural cubic spline with ``knots`` equally spaced knots on [0, 1] is fitted to it by
    least squares, and the calibrated confidence of sample i is ``s_i + spline'(t_i)``
    (averaged over tied s). A test confidence is mapped by linear interpolation between the
    validation ones (held constant outside their range). knots = 6, natural run-out: the
    reference's setting (kartikgupta-at-anu/spline-calibration).

    The method calibrates the top label only. To give a full row whose largest entry is
    p̂, the test row's logits are multiplied by the one β ≥ 0 at which
    ``max softmax(β z) = p̂`` (bisection), p̂ first clipped to [1/K + 1e-6, 1 − 1e-12] (β > 0):
    the classes keep their order, so the predicted class never changes. Float64."""
    p_val = softmax(val_logits.detach().cpu().double().numpy(), axis=1)
    conf = p_val.max(axis=1)
    hit = (p_val.argmax(axis=1) == val_targets.detach().cpu().numpy()).astype(np.float64)
    order = np.lexsort((hit, conf))
    conf, hit = conf[order], hit[order]
    n = len(conf)
    t = np.linspace(0.0, 1.0, n)
    grid = np.linspace(0.0, 1.0, knots)
    coef = np.linalg.lstsq(_basis(grid, t, 0), np.cumsum(hit - conf) / n, rcond=None)[0]
    calibrated = conf + _basis(grid, t, 1) @ coef
    xs, tie = np.unique(conf, return_inverse=True)
    ys = np.bincount(tie, calibrated) / np.bincount(tie)

    zt = test_logits.detach().cpu().double().numpy()
    return torch.from_numpy(_scale_to_top(zt, np.interp(softmax(zt, axis=1).max(axis=1), xs, ys)))
