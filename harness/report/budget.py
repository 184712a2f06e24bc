"""Expected best validation score as a function of the tuning budget (Dodge et al. 2019,
"Show Your Work", §3): does an objective win only when it is tuned at large budgets?

Given the validation scores of the ``k`` trials a tuned run made (each the mean over the
trial's search seeds, the number selection ranks), the best of ``n`` trials drawn from them
with replacement has the distribution of the maximum of ``n`` draws from their empirical
distribution. With the scores sorted, ``v_(1) <= … <= v_(k)``:

    P(max = v_(i)) = (i/k)^n − ((i − 1)/k)^n
    E[max_n]  = Σ_i v_(i) · P(max = v_(i))
    Var[max_n] = Σ_i v_(i)² · P(max = v_(i)) − E[max_n]²

(ties need no care: the probabilities of equal values add up). Dodge et al. draw the curve
for n = 1 … k with a band of one standard deviation, clipped to the observed range, which is
what :func:`expected_best` returns. For a lower-is-better metric the curve is the expected
*minimum*, computed on the negated scores.

Numpy only; shapes are stated per function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True)
class BudgetCurve:
    """The expected best score at budgets ``n`` = 1 … k, with its ±1 s.d. band."""

    budgets: np.ndarray  # (k,) 1 … k
    mean: np.ndarray  # (k,) E[best of n]
    low: np.ndarray  # (k,) max(mean − sd, worst observed)
    high: np.ndarray  # (k,) min(mean + sd, best observed)
    sd: np.ndarray  # (k,)

    def to_json(self) -> dict[str, list[float]]:
        return {"budgets": self.budgets.tolist(), "mean": self.mean.tolist(),
                "low": self.low.tolist(), "high": self.high.tolist(), "sd": self.sd.tolist()}


def max_probabilities(k: int, n: int) -> np.ndarray:
    """(k,) probability that the ``i``-th smallest of ``k`` values is the maximum of ``n``
    draws with replacement: ``(i/k)^n − ((i−1)/k)^n``."""
    if k < 1 or n < 1:
        raise ValueError(f"needs k >= 1 values and n >= 1 draws, got k={k}, n={n}")
    i = np.arange(1, k + 1, dtype=float)
    return (i / k) ** n - ((i - 1) / k) ** n


def expected_best(scores: ArrayLike, *, higher_is_better: bool = True) -> BudgetCurve:
    """The expected best of ``n`` trials for n = 1 … k, from ``scores`` (k,): the trials'
    validation scores, finite. Raises ValueError for no scores or a non-finite one (a
    trial that diverged has no score: leave it out and say so)."""
    v = np.asarray(scores, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"needs a non-empty 1-D array of trial scores, got shape {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError("trial scores must be finite: leave out the trials that diverged")
    sign = 1.0 if higher_is_better else -1.0
    ordered = np.sort(sign * v)
    k = ordered.size
    means, sds = np.empty(k), np.empty(k)
    for n in range(1, k + 1):
        p = max_probabilities(k, n)
        m = float(p @ ordered)
        means[n - 1] = m
        sds[n - 1] = float(np.sqrt(max(p @ ordered**2 - m * m, 0.0)))
    low = np.maximum(means - sds, ordered[0])
    high = np.minimum(means + sds, ordered[-1])
    if sign < 0:  # back to the metric's own scale: the expected minimum, its band flipped
        means, low, high = -means, -high, -low
    return BudgetCurve(np.arange(1, k + 1), means, low, high, sds)
