"""Isotonic regression, one class against the rest (Zadrozny & Elkan 2002, "Transforming
classifier scores into accurate multiclass probability estimates")."""

import numpy as np
import torch
from scipy.special import softmax
from sklearn.isotonic import IsotonicRegression


def posthoc_calibration(val_logits: torch.Tensor, val_targets: torch.Tensor,
                        test_logits: torch.Tensor) -> torch.Tensor:
    """For each class k, the non-decreasing map of ``p_k = softmax(z)_k`` fitted to the
    indicator ``1[y = k]`` on validation by least squares (pool adjacent violators; tied
    p_k pooled), ``IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1)``, applied to
    the test p_k (clipped to the validation range); each row is then divided by its sum,
    and a row whose values are all 0 keeps its uncalibrated softmax. No hyperparameters.
    Float64."""
    p_val = softmax(val_logits.detach().cpu().double().numpy(), axis=1)
    p_test = softmax(test_logits.detach().cpu().double().numpy(), axis=1)
    y = val_targets.detach().cpu().numpy()
    out = np.empty_like(p_test)
    for k in range(p_val.shape[1]):
        iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0)
        out[:, k] = iso.fit(p_val[:, k], (y == k).astype(np.float64)).predict(p_test[:, k])
    total = out.sum(axis=1, keepdims=True)
    return torch.from_numpy(np.where(total > 0, out / np.where(total > 0, total, 1), p_test))
