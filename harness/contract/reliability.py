"""The numbers of a reliability diagram, for the judge of any suite that declares one
(``Suite.reliability``): per confidence bin, the mean confidence, the share of hits and the
number of samples. Which bin a sample falls in is the suite's choice (its binning is part
of its protocol); the averages are the same for every suite."""

from __future__ import annotations

import numpy as np

from harness.contract.suite import ReliabilitySpec


def reliability_curves(spec: ReliabilitySpec, confidence: np.ndarray, hits: np.ndarray,
                       which: np.ndarray, bins: int) -> dict[str, list[float]]:
    """The three curves ``spec`` names, over ``bins`` bins: the mean ``confidence`` and
    mean ``hits`` (0/1 floats) of the samples whose bin is ``which``, and their count. An
    empty bin has no confidence or accuracy: NaN, stored as null."""
    count = np.bincount(which, minlength=bins).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_confidence = np.bincount(which, weights=confidence, minlength=bins) / count
        accuracy = np.bincount(which, weights=hits, minlength=bins) / count
    return {spec.confidence: mean_confidence.tolist(), spec.accuracy: accuracy.tolist(),
            spec.count: count.tolist()}
