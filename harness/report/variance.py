"""Where a score's seed variance comes from: a random-effects ANOVA of a factorial run.

A factorial run (``harness run --factorial N``) trains one objective on one variant with
every combination of N levels of each seed stream (``harness.contract.seeding.FACTORS``: the
initialisation, the data order, the noise draw), one cell each. The scores form an
array with one axis per stream. Each stream, and each combination of streams, is a
random effect; a plain seed draws a fresh level of every stream at once, so the
variance between plain seeds is the sum of all the components.

Estimates are the ANOVA (expected-mean-squares) estimators of a balanced design without
replication: with ``MS_T`` the mean square of the effect of the factor set ``T`` and
``n_f`` the levels of factor ``f``,

    E[MS_S] = Σ_{T ⊇ S} (Π_{f ∉ T} n_f) σ²_T,
    so  σ²_S = Σ_{T ⊇ S} (−1)^{|T|−|S|} MS_T / Π_{f ∉ S} n_f

(the highest-order effect doubles as the residual: one cell per combination cannot tell
them apart). A component estimate can come out negative; it is shown as 0, and shares
are of the sum of the components so truncated.

Intervals are generalized confidence intervals (Weerahandi 1993; for variance components
Burdick, Borror & Montgomery 2005, ch. 3): each mean square's pivot
``MS_T · df_T / χ²(df_T)`` is drawn (seeded), the estimator formula is applied to the
drawn pivots, and the interval is the 2.5 and 97.5 percentiles of what comes out. Measured
coverage of the nominal 95% interval of each source's *share* of the total (2,000 seeded
designs per case; effects normal unless said; ``tests/engine/test_variance.py`` repeats part of
this and fails outside 93–97% for the streams):

    ======================================  =====================  =====================
    components (init, order, noise, ×)      3×3×3: streams, ×      5×5×5: streams, ×
    ======================================  =====================  =====================
    equal, residual only                    94.5 94.0 95.8, 99.9   95.4 95.2 95.9, 98.1
    noise dominant (¼, ¼, 4, ¼)             95.8 95.4 94.9, 99.6   95.8 95.2 95.9, 97.7
    equal + two-way interactions            95.1 96.4 94.8, 99.6   95.4 96.0 96.2, 96.8
    no init effect (0, 1, 1, 1)             99.3 93.8 95.8, 99.8   98.7 95.1 95.9, 97.9
    equal, Student-t(5) residual            94.6 94.6 96.2, 99.6   95.7 95.9 95.6, 96.9
    equal, log-normal σ=0.5 residual        96.2 95.2 95.1, 99.8   96.4 95.6 95.6, 96.2
    ======================================  =====================  =====================

A share whose true value is 0 is covered more often (its lower end sits at 0), and the
interactions' share is conservative at 3 levels. With three levels a stream's effect
is estimated from 2 degrees of freedom, so its interval is wide (0.6–0.8 of the [0, 1]
range; 0.3–0.6 at 5 levels): a 3×3×3 run says which stream dominates only when one does
by far.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from harness.contract.seeding import FACTORS, MAX_LEVELS

INTERACTIONS = "interactions"
DRAWS = 10_000  # generalized-pivot draws per interval: the percentile's Monte Carlo error
# is ~0.2 percentage points of coverage


@dataclass(frozen=True)
class Source:
    """One source of variance: a stream (its main effect) or ``interactions`` (every
    combination of streams, the residual included)."""

    name: str
    variance: float  # estimated component (truncated at 0)
    share: float | None  # of the total variance; None when the scores are constant
    share_low: float | None
    share_high: float | None

    @property
    def sd(self) -> float:
        return math.sqrt(self.variance)


@dataclass(frozen=True)
class Decomposition:
    """The variance of one (objective, variant) score split by its source."""

    factors: tuple[str, ...]  # the streams that vary (more than one level)
    levels: tuple[int, ...]
    mean: float
    total: float  # estimated variance between plain seeds (sum of the components)
    sources: tuple[Source, ...]  # each factor, then interactions
    level: float = 0.95

    @property
    def total_sd(self) -> float:
        return math.sqrt(self.total)

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        raise KeyError(name)


def decompose(scores: ArrayLike, factors: Sequence[str], *, level: float = 0.95,
              draws: int = DRAWS, seed: int = 0) -> Decomposition:
    """Split the variance of ``scores`` (one axis per factor, one score per combination of
    levels) into the factors' main effects and their interactions.

    Factors with a single level are held fixed and dropped. Needs at least two factors
    that vary, each with at least two levels, and finite scores.
    """
    y = np.asarray(scores, dtype=float)
    if y.ndim != len(factors):
        raise ValueError(f"scores have {y.ndim} axes for {len(factors)} factors")
    if not np.all(np.isfinite(y)):
        raise ValueError("scores must be finite (leave diverged cells out of a factorial "
                         "run: a missing combination breaks the balanced design)")
    varying = [i for i, n in enumerate(y.shape) if n > 1]
    if len(varying) < 2:
        raise ValueError("a decomposition needs two or more factors with two or more "
                         f"levels each, got levels {dict(zip(factors, y.shape, strict=True))}")
    y = y.reshape([y.shape[i] for i in varying])
    names = tuple(factors[i] for i in varying)
    ms, df = _mean_squares(y)
    if np.ptp(y) == 0:  # constant: rounding in the means must not invent a variance
        ms = dict.fromkeys(ms, 0.0)
    mean = float(y.mean())
    point = _components({s: np.array([v]) for s, v in ms.items()}, y.shape)
    point = {s: float(v[0]) for s, v in point.items()}

    rng = np.random.default_rng(seed)
    drawn = {s: ms[s] * df[s] / rng.chisquare(df[s], draws) for s in ms}
    pivots = _components(drawn, y.shape)
    alpha = (1 - level) / 2
    sources = []
    mains = [(i,) for i in range(y.ndim)]
    total = sum(point.values())
    pivot_total = sum(pivots.values())
    for label, subsets in [*((names[s[0]], [s]) for s in mains),
                           (INTERACTIONS, [s for s in point if len(s) > 1])]:
        variance = sum(point[s] for s in subsets)
        if total <= 0:
            sources.append(Source(label, variance, None, None, None))
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            share = sum(pivots[s] for s in subsets) / pivot_total
        share = share[np.isfinite(share)]
        low, high = np.quantile(share, [alpha, 1 - alpha]) if share.size else (None, None)
        sources.append(Source(label, variance, variance / total,
                              None if low is None else float(low),
                              None if high is None else float(high)))
    return Decomposition(names, y.shape, mean, total, tuple(sources), level)


def complete_grid(values: Mapping[tuple[int, int, int], float | None],
                  streams: Sequence[str]) -> np.ndarray | None:
    """The scores of the largest full grid in ``values`` ({(init, order, noise) level:
    score or None}): levels 0…n−1 of every stream in ``streams`` (level 0 of the others),
    every score finite; None when not even two levels are complete."""
    varied = [i for i, f in enumerate(FACTORS) if f in streams]
    best = None
    for n in range(2, MAX_LEVELS + 1):
        shape = [n if i in varied else 1 for i in range(len(FACTORS))]
        grid = np.empty(shape)
        for index in itertools.product(*(range(k) for k in shape)):
            value = values.get(index)
            if value is None or not math.isfinite(value):
                return best
            grid[index] = value
        best = grid
    return best


def _mean_squares(y: np.ndarray) -> tuple[dict[tuple[int, ...], float],
                                          dict[tuple[int, ...], int]]:
    """Mean square and degrees of freedom of every effect (non-empty factor subset)."""
    k = y.ndim
    axes = range(k)
    ms, df = {}, {}
    for size in range(1, k + 1):
        for subset in itertools.combinations(axes, size):
            effect = np.zeros([y.shape[i] if i in subset else 1 for i in axes])
            for r in range(len(subset) + 1):  # inclusion-exclusion over marginal means
                for kept in itertools.combinations(subset, r):
                    others = tuple(i for i in axes if i not in kept)
                    sign = (-1) ** (len(subset) - r)
                    effect = effect + sign * y.mean(axis=others, keepdims=True)
            replicates = math.prod(y.shape[i] for i in axes if i not in subset)
            df[subset] = math.prod(y.shape[i] - 1 for i in subset)
            ms[subset] = replicates * float(np.sum(effect ** 2)) / df[subset]
    return ms, df


def _components(ms: dict[tuple[int, ...], np.ndarray],
                shape: tuple[int, ...]) -> dict[tuple[int, ...], np.ndarray]:
    """σ²_S = Σ_{T ⊇ S} (−1)^{|T|−|S|} MS_T / Π_{f ∉ S} n_f, truncated at 0."""
    out = {}
    for s in ms:
        value = sum((-1) ** (len(t) - len(s)) * m for t, m in ms.items() if set(s) <= set(t))
        scale = math.prod(n for i, n in enumerate(shape) if i not in s)
        out[s] = np.maximum(value / scale, 0.0)
    return out
