"""Histogram binning, one class against the rest (Zadrozny & Elkan 2001, "Obtaining calibrated
probability estimates from decision trees and naive Bayesian classifiers").

Search space: bins in {5, ..., 30} (int; range ours around the usual 10 to 15 bins).
"""

import numpy as np
import torch
from scipy.special import softmax

from suites.calibration.metrics import equal_width_bins

SEARCH_SPACE = {
    "bins": {"low": 5, "high": 30},
}


def posthoc_calibration(val_logits: torch.Tensor, val_targets: torch.Tensor,
                        test_logits: torch.Tensor, *, bins: int = 15) -> torch.Tensor:
    """For each class k, ``p_k = softmax(z)_k`` in ``bins`` equal-width bins on [0, 1]
    (``b/B < p <= (b+1)/B``, as ``suites.calibration.metrics.equal_width_bins``); a bin's value
    is the share of the validation samples in it labelled k, an empty bin's its centre
    ``(b + ½)/B``. Each test p_k becomes its bin's value and each row is divided by its
    sum; a row whose values are all 0 keeps its uncalibrated softmax. bins = 15: the
    suite's ECE bins (Guo et al. 2017's count). Float64."""
    p_val = softmax(val_logits.detach().cpu().double().numpy(), axis=1)
    p_test = softmax(test_logits.detach().cpu().double().numpy(), axis=1)
    y = val_targets.detach().cpu().numpy()
    centre = (np.arange(bins) + 0.5) / bins
    out = np.empty_like(p_test)
    for k in range(p_val.shape[1]):
        bin_of = equal_width_bins(p_val[:, k], bins)
        count = np.bincount(bin_of, minlength=bins)
        hits = np.bincount(bin_of, weights=(y == k).astype(np.float64), minlength=bins)
        value = np.where(count > 0, hits / np.maximum(count, 1), centre)
        out[:, k] = value[equal_width_bins(p_test[:, k], bins)]
    total = out.sum(axis=1, keepdims=True)
    return torch.from_numpy(np.where(total > 0, out / np.where(total > 0, total, 1), p_test))
