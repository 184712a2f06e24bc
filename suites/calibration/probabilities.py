"""What a post-hoc calibrator must return: one probability row per test row.

The judge and the validator's smoke test share this check, so an objective that passes
validation fails in a cell only on data the smoke batches did not cover.
"""

from __future__ import annotations

import numpy as np

from harness.contract.outputs import probability_rows


def problem(probs: np.ndarray, shape: tuple[int, int]) -> str:
    """Why ``probs`` is not ``shape`` rows of probabilities; ``""`` when it is."""
    if probs.shape != shape:
        return f"returned shape {list(probs.shape)}; it must be {list(shape)}, like test_logits"
    if probs.dtype.kind != "f":
        return f"returned {probs.dtype} values; probabilities are floating point"
    return probability_rows(probs)
