"""The test-time adaptation suite's metrics of one member, from the classes it predicted
for every sample of its stream and for the clean pool after it: online error overall, on
the held-out corruptions, per corruption and per severity, the clean error, and the
online-error curve over windows of batches."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from suites.tta import CORRUPTIONS, SEVERITIES

if TYPE_CHECKING:
    from suites.tta.pipeline import Private

WINDOWS = 100  # points of the online-error curve


def member_metrics(pred: np.ndarray, clean_pred: np.ndarray, p: Private,
                   i: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Every metric and curve of member ``i`` from its predicted classes."""
    wrong = pred != p.labels[i]
    # a tuned search's stream is all held-out corruptions: its online error is theirs
    held = (p.corruption[i] >= len(CORRUPTIONS)) & (not p.searching)
    metrics = {"online_error": float(wrong[~held].mean()),
               "clean_error": float((clean_pred != p.clean_labels).mean())}
    if held.any():
        metrics["heldout_error"] = float(wrong[held].mean())
    for c, name in enumerate(CORRUPTIONS):
        on = p.corruption[i] == c
        if on.any():
            metrics[f"error_{name}"] = float(wrong[on].mean())
    severities = np.unique(p.severity[i][~held])
    if len(severities) > 1:
        for s in SEVERITIES:
            on = (p.severity[i] == s) & ~held
            if on.any():
                metrics[f"error_severity_{s}"] = float(wrong[on].mean())
    # The curve: error per window of consecutive batches of the benchmark corruptions.
    main = [(lo, hi) for lo, hi in p.batches if not held[lo]]
    size = -(-len(main) // WINDOWS)
    xs, ys = [], []
    for w in range(0, len(main), size):
        part = main[w:w + size]
        hits = np.concatenate([wrong[lo:hi] for lo, hi in part])
        xs.append(float(w + len(part)))
        ys.append(float(hits.mean()))
    return metrics, {"window_batches": xs, "online_error_curve": ys}
