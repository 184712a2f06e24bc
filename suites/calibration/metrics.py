"""The calibration suite's metrics and the judge's temperature scaling.

Pure functions over numpy arrays. ``probs: [N, K]`` are predicted class probabilities
(rows sum to 1), ``labels: [N]`` integer classes in ``[0, K)``. Conventions follow the
reference implementations the literature reports with (Guo et al. 2017's
``_ECELoss``; Mukhoti et al. 2020's ``AdaptiveECELoss`` / ``ClasswiseECELoss``):

- equal-width bins on [0, 1], lower-exclusive and upper-inclusive (``(b-1)/B < c <= b/B``;
  a confidence of exactly 0, which only underflow gives, falls in the first bin);
- every bin is weighted by its share of the samples; empty bins are skipped;
- equal-mass bins (AdaECE) have edges ``np.interp(linspace(0, N, B+1), arange(N),
  sort(c))``. Deviation from the reference: the first bin is closed below, so the
  least-confident sample counts (the reference's ``conf > lower`` drops it).

Binned ECE is biased upward at small N; compare objectives at equal N (every suite
evaluates every objective on the same test set).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

from suites.calibration import BINS

Norm = Literal["l1", "l2", "max"]


def _checked(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels)
    if probs.ndim != 2 or labels.shape != (probs.shape[0],) or probs.shape[0] == 0:
        raise ValueError(f"probs must be [N, K] and labels [N], N > 0; got {probs.shape} "
                         f"and {labels.shape}")
    if labels.dtype.kind not in "iu" or labels.min() < 0 or labels.max() >= probs.shape[1]:
        raise ValueError(f"labels must be integers in [0, {probs.shape[1]})")
    return probs, labels.astype(np.int64)


def _top_label(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's top-class confidence and whether that class is its label (0/1)."""
    probs, labels = _checked(probs, labels)
    return probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(np.float64)


def _binned_error(conf: np.ndarray, hits: np.ndarray, bin_of: np.ndarray, bins: int,
                  norm: Norm) -> float:
    """``norm`` of |mean hit − mean confidence| over non-empty bins, weighted by size."""
    count = np.bincount(bin_of, minlength=bins).astype(np.float64)
    full = count > 0
    gap = np.abs(np.bincount(bin_of, hits, bins)[full] - np.bincount(bin_of, conf, bins)[full])
    gap /= count[full]
    weight = count[full] / len(conf)
    if norm == "l1":
        return float(np.sum(weight * gap))
    if norm == "l2":
        return float(math.sqrt(np.sum(weight * gap**2)))
    if norm == "max":
        return float(gap.max())
    raise ValueError(f"norm must be 'l1', 'l2' or 'max', not {norm!r}")


def equal_width_bins(values: np.ndarray, bins: int = BINS) -> np.ndarray:
    """The bin of each value in [0, 1]: ``b`` with ``b/B < v <= (b+1)/B`` (0 for v = 0)."""
    inner = np.linspace(0.0, 1.0, bins + 1)[1:-1]
    return np.searchsorted(inner, values, side="left")


def ece(probs: np.ndarray, labels: np.ndarray, bins: int = BINS,
        norm: Norm = "l1") -> float:
    """Top-label expected calibration error over ``bins`` equal-width bins: ``l1`` is ECE,
    ``l2`` the RMS calibration error, ``max`` MCE (the worst non-empty bin)."""
    conf, hits = _top_label(probs, labels)
    return _binned_error(conf, hits, equal_width_bins(conf, bins), bins, norm)


def mce(probs: np.ndarray, labels: np.ndarray, bins: int = BINS) -> float:
    """Maximum calibration error: the largest |accuracy − confidence| of a non-empty bin."""
    return ece(probs, labels, bins, "max")


def adaptive_ece(probs: np.ndarray, labels: np.ndarray, bins: int = BINS) -> float:
    """AdaECE: top-label ECE over ``bins`` equal-mass bins (about N/B samples each)."""
    conf, hits = _top_label(probs, labels)
    n = len(conf)
    edges = np.interp(np.linspace(0, n, bins + 1), np.arange(n), np.sort(conf))
    bin_of = np.clip(np.searchsorted(edges[1:-1], conf, side="left"), 0, bins - 1)
    return _binned_error(conf, hits, bin_of, bins, "l1")


def classwise_ece(probs: np.ndarray, labels: np.ndarray, bins: int = BINS) -> float:
    """Classwise ECE: for each class k, every sample's ``p_k`` in equal-width bins against
    the frequency of class k in the bin; the mean over the K classes."""
    probs, labels = _checked(probs, labels)
    k = probs.shape[1]
    per_class = [
        _binned_error(probs[:, c], (labels == c).astype(np.float64),
                      equal_width_bins(probs[:, c], bins), bins, "l1")
        for c in range(k)]
    return float(np.mean(per_class))


def nll(probs: np.ndarray, labels: np.ndarray) -> float:
    """Mean negative log-likelihood of the true class; probabilities are clipped below at
    float64's epsilon (as scikit-learn's ``log_loss``) so one zero is large, not infinite."""
    probs, labels = _checked(probs, labels)
    p_true = probs[np.arange(len(labels)), labels]
    return float(-np.mean(np.log(np.clip(p_true, np.finfo(np.float64).eps, 1.0))))


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    """Multiclass Brier score: mean over samples of Σ_k (p_k − 1[y = k])² (summed over
    classes, in [0, 2]; some papers divide by K)."""
    probs, labels = _checked(probs, labels)
    target = np.zeros_like(probs)
    target[np.arange(len(labels)), labels] = 1.0
    return float(np.mean(np.sum((probs - target) ** 2, axis=1)))


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(_top_label(probs, labels)[1]))


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """``softmax(logits / T)`` in float64, row-wise."""
    return np.exp(log_softmax(np.asarray(logits, dtype=np.float64) / temperature, axis=1))


def fit_temperature(logits: np.ndarray, labels: np.ndarray, *,
                    low: float = 0.01, high: float = 100.0) -> float:
    """The temperature T in [low, high] minimising the NLL of ``softmax(logits / T)``
    (Guo et al. 2017, fitted on validation logits).

    The NLL is convex in β = 1/T (a log-sum-exp of functions linear in β, minus one linear
    in β), so it has one minimum; a bounded Brent search on log β finds it to 1e-7
    relative, where the reference's LBFGS (50 steps from T = 1.5) may stop short.
    """
    z = np.asarray(logits, dtype=np.float64)
    _, labels = _checked(z, labels)
    if not np.all(np.isfinite(z)):
        raise ValueError("logits must be finite to fit a temperature")
    rows = np.arange(len(labels))

    def loss(log_beta: float) -> float:
        return float(-np.mean(log_softmax(z * math.exp(log_beta), axis=1)[rows, labels]))

    found = minimize_scalar(loss, bounds=(-math.log(high), -math.log(low)), method="bounded",
                            options={"xatol": 1e-7})
    return float(math.exp(-found.x))


def metrics(probs: np.ndarray, labels: np.ndarray, bins: int = BINS) -> dict[str, float]:
    """Every metric above, by name."""
    return {"accuracy": accuracy(probs, labels), "ece": ece(probs, labels, bins),
            "adaece": adaptive_ece(probs, labels, bins),
            "classwise_ece": classwise_ece(probs, labels, bins),
            "mce": mce(probs, labels, bins), "nll": nll(probs, labels),
            "brier": brier(probs, labels)}
