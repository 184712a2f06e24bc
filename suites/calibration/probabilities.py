"""What a post-hoc calibrator must return: one probability row per test row.

The judge and the validator's smoke test share this check, so an objective that passes
validation fails in a cell only on data the smoke batches did not cover.
"""

from __future__ import annotations

import numpy as np

ROW_SUM_TOLERANCE = 1e-3  # float32 softmax rows of 1000 classes sum to 1 within ~1e-6


def problem(probs: np.ndarray, shape: tuple[int, int]) -> str:
    """Why ``probs`` is not ``shape`` rows of probabilities; ``""`` when it is."""
    if probs.shape != shape:
        return f"returned shape {list(probs.shape)}; it must be {list(shape)}, like test_logits"
    if probs.dtype.kind != "f":
        return f"returned {probs.dtype} values; probabilities are floating point"
    if not np.isfinite(probs).all():
        return f"returned {int((~np.isfinite(probs)).sum())} non-finite probabilities (NaN or inf)"
    if probs.size and (probs.min() < 0 or probs.max() > 1):
        return (f"returned probabilities outside [0, 1] (min {probs.min():.4g}, "
                f"max {probs.max():.4g})")
    sums = probs.astype(np.float64).sum(axis=-1)
    worst = float(np.abs(sums - 1).max()) if sums.size else 0.0
    if worst > ROW_SUM_TOLERANCE:
        return (f"returned rows that do not sum to 1 (off by up to {worst:.4g}; tolerance "
                f"{ROW_SUM_TOLERANCE})")
    return ""
