"""Seeds where the verdict is undecided: a group-sequential design for one paired comparison.

A pre-declared rule for the final evaluation of an objective against the suite's reference:
run ``start`` seeds and add ``step`` more only while the paired comparison is undecided, up
to ``cap``. Looks are at n = start, start + step, ..., cap. Only numpy and scipy (lazily).

Conventions
-----------
* Input to :func:`decide` is the per-seed differences objective − reference, shape
  ``(n,)``, oriented so that positive means the objective is better (``mean_diff`` of
  :func:`harness.report.stats.compare_paired`), n one of the design's looks.
* Error spending: Lan–DeMets O'Brien–Fleming type, α(t) = 2 − 2Φ(z_{1−α/4}/√t) on each
  side (gsDesign's ``sfLDOF`` at one-sided level α/2), so the two sides together spend
  2·α(t), α at t = 1; the information fraction is t_k = n_k / cap.
* z boundaries c_k are exact for the look statistics Z_k of a normal mean with known
  spread (corr(Z_i, Z_j) = √(n_i/n_j)): P(|Z_1| < c_1, ..., |Z_{k−1}| < c_{k−1},
  |Z_k| ≥ c_k) is the spending increment at look k.
* **Nominal p-value convention.** The spread is not known and seeds are few, so a look
  uses the paired t-test with n_k − 1 degrees of freedom (:func:`harness.report.stats.t_test`)
  and rejects when its two-sided p-value is below p_k = 2(1 − Φ(c_k)), the z boundary's
  nominal p-value (Jennison & Turnbull 2000, §11.4: the "significance level" approach).
  Each look then has exactly its nominal marginal level under normal differences, but the
  looks' t statistics are less correlated than the z's (each has its own spread estimate),
  so the joint level is above α: measured with 10^6 normal draws at effect 0, two-sided
  5.2% for start 5, step 5, cap 20; 5.6% for 3, 1, 10; 5.5% for 5, 1, 20. Hence a
  **calibration**: the z boundaries spend a smaller α' (:func:`calibrated_level`: 0.0478,
  0.0440, 0.0454 for those designs), found by simulation so that the t looks reject at α;
  with fresh draws the three designs then reject 4.96%, 5.02%, 4.96% (standard error
  0.02%), each side about half. The calibration is for normal differences: skewed ones
  move the two sides apart (bench/sequential.py measures how far).
* ``comparisons`` = m splits α Bonferroni-style, α/m per pair (every objective against
  the reference). Conservative: it ignores that the pairs share the reference's seeds and
  never passes a decided pair's α on. Holm is not used across looks: its step-down ranks
  all the pairs' p-values at one moment, but pairs here stop at different looks, and
  handing a decided pair's α to the others would change boundaries whose earlier looks
  were already taken (Maurer & Bretz 2013's graphical group-sequential tests do that).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from harness.report.stats import _scores, t_test

__all__ = ["AT_CAP", "BETTER", "MORE", "WORSE", "Decision", "Design", "boundaries",
           "calibrated_level", "decide", "looks", "simulate", "spent", "z_boundaries"]

BETTER, WORSE = "better", "worse"
MORE, AT_CAP = "undecided — add seeds", "undecided at cap"
DISTRIBUTIONS = ("normal", "lognormal", "mixture")
_GRID = 301  # Simpson points per look for the recursive integration (odd)
_CALIBRATION_REPS = 500_000  # draws that calibrate a design (fixed seed)


@dataclass(frozen=True)
class Design:
    """Looks at n = start, start + step, ..., cap seeds; two-sided level ``alpha``.

    ValueError unless start >= 2 (a t-test needs two seeds), step >= 1, cap >= start,
    cap = start + k·step for some k >= 0, and 0 < alpha < 1. start == cap is the fixed
    design (one look, the plain t-test at level alpha)."""

    start: int
    step: int
    cap: int
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if not all(isinstance(v, int) for v in (self.start, self.step, self.cap)):
            raise ValueError(f"start, step and cap must be integers, got {self}")
        if self.start < 2:
            raise ValueError(f"start must be >= 2 seeds (a t-test needs two), got {self.start}")
        if self.step < 1:
            raise ValueError(f"step must be >= 1 seed, got {self.step}")
        if self.cap < self.start:
            raise ValueError(f"cap ({self.cap}) must be >= start ({self.start})")
        if (self.cap - self.start) % self.step:
            raise ValueError(f"cap must be start + k·step: {self.cap} is not {self.start} "
                             f"plus a multiple of {self.step}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must lie in (0, 1), got {self.alpha}")


@dataclass(frozen=True)
class Decision:
    """The rule's answer at one look. ``verdict``: BETTER, WORSE, MORE or AT_CAP;
    ``next_n``: the seed count to run to next (None once the rule stops); ``p_value``: the
    paired t-test's at ``n`` seeds; ``threshold``: the look's nominal p (reject below)."""

    verdict: str
    n: int
    next_n: int | None
    p_value: float
    threshold: float
    mean_diff: float


def looks(design: Design) -> list[int]:
    """The seed counts at which the rule looks: [start, start + step, ..., cap]."""
    return list(range(design.start, design.cap + 1, design.step))


def _level(design: Design, comparisons: int) -> float:
    if isinstance(comparisons, bool) or not isinstance(comparisons, int) or comparisons < 1:
        raise ValueError(f"comparisons must be an integer >= 1, got {comparisons!r}")
    return design.alpha / comparisons


def spent(design: Design, comparisons: int = 1, level: float | None = None) -> np.ndarray:
    """Cumulative two-sided α the z boundaries spend by each look, shape (K,):
    4(1 − Φ(z_{1−a/4}/√t_k)), t_k = n_k / cap, a = ``level`` or alpha / comparisons;
    the last entry is a."""
    from scipy.stats import norm

    a = _level(design, comparisons) if level is None else level
    t = np.asarray(looks(design), dtype=float) / design.cap
    return 4.0 * norm.sf(norm.isf(a / 4) / np.sqrt(t))


@functools.lru_cache(maxsize=256)
def _z_bounds(ns: tuple[int, ...], alpha: float) -> np.ndarray:
    """Two-sided z boundaries c_k, shape (K,), for looks ``ns`` spending ``alpha``.
    Armitage–McPherson–Rowe recursive integration (Jennison & Turnbull ch. 19) of the score
    S_k = √n_k·Z_k, whose increments are independent: S_k's sub-density on the continuation
    region is the previous one convolved with N(0, n_k − n_{k−1}), on a 301-point Simpson
    grid (c_k within 1e-7 of 1001 points). Not multivariate_normal.cdf: Genz's integration
    is randomized (~1e-5) and root-finding would need a K-dimensional integral per step."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    cum = 4.0 * norm.sf(norm.isf(alpha / 4) / np.sqrt(np.asarray(ns, dtype=float) / ns[-1]))
    spend = np.diff(cum, prepend=0.0)
    c = np.empty(len(ns))
    u = weighted = None  # previous look's grid, and its sub-density times Simpson weights
    for k, n in enumerate(ns):
        if k == 0:
            c[0] = norm.isf(spend[0] / 2)
        else:
            sd = math.sqrt(n - ns[k - 1])

            def excess(ck: float, u=u, weighted=weighted, sd=sd, n=n, k=k) -> float:
                b = ck * math.sqrt(n)  # P(stop now | S_{k-1} = u), integrated over u
                return float(weighted @ (norm.cdf((-b - u) / sd) + norm.sf((b - u) / sd))
                             - spend[k])

            c[k] = 40.0 if excess(40.0) >= 0 else brentq(excess, 0.0, 40.0, xtol=1e-12)
        half = min(c[k], 12.0) * math.sqrt(n)  # beyond 12 sd the density is < 1e-31
        s = np.linspace(-half, half, _GRID)
        w = np.where(np.arange(_GRID) % 2, 4.0, 2.0) * (2 * half / (_GRID - 1)) / 3
        w[[0, -1]] /= 2  # Simpson's weights h/3·(1, 4, 2, ..., 2, 4, 1)
        if k == 0:
            f = norm.pdf(s / math.sqrt(n)) / math.sqrt(n)
        else:
            f = norm.pdf((s[:, None] - u[None, :]) / sd) @ weighted / sd
        u, weighted = s, w * f
    return c


def z_boundaries(design: Design, comparisons: int = 1, level: float | None = None
                 ) -> np.ndarray:
    """Exact two-sided z boundaries c_k per look, shape (K,), spending ``level`` (default
    alpha / comparisons) O'Brien–Fleming-style: reject at look k when |Z_k| >= c_k."""
    a = _level(design, comparisons) if level is None else level
    return _z_bounds(tuple(looks(design)), a).copy()


def _null_t(ns: tuple[int, ...], reps: int, seed: int) -> np.ndarray:
    """|t| at each look, shape (K, reps), for standard normal differences, drawn as
    sufficient statistics (each increment's sum and within-increment χ²): cost O(K·reps)."""
    rng = np.random.default_rng(seed)
    s, q, prev = np.zeros(reps), np.zeros(reps), 0
    out = np.empty((len(ns), reps), dtype=np.float32)
    for k, n in enumerate(ns):
        m = n - prev
        total = math.sqrt(m) * rng.standard_normal(reps)
        q += total**2 / m + (rng.chisquare(m - 1, reps) if m > 1 else 0.0)
        s += total
        with np.errstate(divide="ignore"):
            out[k] = np.abs(s / n) / np.sqrt(np.maximum(q - s**2 / n, 0) / ((n - 1) * n))
        prev = n
    return out


@functools.lru_cache(maxsize=64)
def _calibrated(ns: tuple[int, ...], alpha: float) -> float:
    from scipy.stats import norm
    from scipy.stats import t as student

    if len(ns) == 1:
        return alpha  # one look: the t-test is exact
    t, df = _null_t(ns, _CALIBRATION_REPS, seed=20261207), np.asarray(ns) - 1

    def rate(a: float) -> float:
        crit = student.isf(norm.sf(_z_bounds(ns, a)), df).astype(np.float32)
        return float(np.mean(np.any(t > crit[:, None], axis=0)))

    a, tried = alpha, {}
    for _ in range(8):  # the rate is nearly proportional to a: rescale until it holds
        tried[a] = rate(a)
        if abs(tried[a] - alpha) * _CALIBRATION_REPS < 1:
            break
        a = min(a * alpha / max(tried[a], 1 / _CALIBRATION_REPS), 0.5)
    while not any(r <= alpha for r in tried.values()):
        a = min(tried) * 0.99
        tried[a] = rate(a)
    return max(a for a, r in tried.items() if r <= alpha)


def calibrated_level(design: Design, comparisons: int = 1) -> float:
    """The level a' the z boundaries spend so that the t looks (nominal p-value convention)
    reject at rate alpha / comparisons for normal differences with no effect, by simulation:
    500,000 draws with a fixed seed (the rule stays deterministic), a' rescaled until the
    rate matches to a draw and is not above; error about ±0.03% (a standard error at 5%).
    alpha / comparisons itself for a single look."""
    return _calibrated(tuple(looks(design)), _level(design, comparisons))


def boundaries(design: Design, comparisons: int = 1, calibrate: bool = True) -> np.ndarray:
    """Nominal two-sided p thresholds per look, shape (K,): p_k = 2(1 − Φ(c_k)) with c_k
    the z boundaries at :func:`calibrated_level` (at alpha / comparisons itself when
    ``calibrate`` is False). Reject at look k when the paired t-test's p-value is below."""
    from scipy.stats import norm

    a = calibrated_level(design, comparisons) if calibrate else _level(design, comparisons)
    return 2.0 * norm.sf(_z_bounds(tuple(looks(design)), a))


def decide(diffs: ArrayLike, design: Design, comparisons: int = 1) -> Decision:
    """The rule at one look. ``diffs``: (n,) per-seed differences objective − reference
    (positive = objective better), all finite, n one of ``looks(design)`` (else
    ValueError). BETTER / WORSE when the t-test's p-value is below the look's threshold
    (the sign of the mean says which; stop), MORE with ``next_n`` = n + step below the
    cap, AT_CAP at the cap (stop: no verdict)."""
    d = _scores(diffs, "diffs")
    n, ns = int(d.size), looks(design)
    if n not in ns:
        raise ValueError(f"{n} seeds is not a look of this design; looks are at {ns}")
    threshold = float(boundaries(design, comparisons)[ns.index(n)])
    p, mean = float(t_test(d)), float(np.mean(d))
    if p < threshold:
        return Decision(BETTER if mean > 0 else WORSE, n, None, p, threshold, mean)
    if n == design.cap:
        return Decision(AT_CAP, n, None, p, threshold, mean)
    return Decision(MORE, n, n + design.step, p, threshold, mean)


def _standard(rng: np.random.Generator, dist: str, shape: tuple[int, int]) -> np.ndarray:
    """Draws of mean 0 and standard deviation 1. "lognormal": exp(0.5·N) standardized,
    skewness +1.75; "mixture": 70% N(0.7, 0.03²), 30% N(0.3, 0.05²) standardized, the
    objective's seed "sometimes diverges" (bimodal, skewness −0.88)."""
    if dist == "normal":
        return rng.standard_normal(shape)
    if dist == "lognormal":
        mean, var = math.exp(0.125), (math.exp(0.25) - 1) * math.exp(0.25)
        return (np.exp(0.5 * rng.standard_normal(shape)) - mean) / math.sqrt(var)
    if dist == "mixture":
        ok = rng.random(shape) < 0.7
        x = np.where(ok, 0.7, 0.3) + np.where(ok, 0.03, 0.05) * rng.standard_normal(shape)
        var = 0.7 * 0.03**2 + 0.3 * 0.05**2 + 0.7 * 0.3 * 0.4**2
        return (x - 0.58) / math.sqrt(var)
    raise ValueError(f"dist must be one of {DISTRIBUTIONS}, got {dist!r}")


def simulate(design: Design, effect: float, spread: float, reps: int,
             rng: np.random.Generator, dist: str = "normal", comparisons: int = 1,
             calibrate: bool = True, chunk: int = 20_000) -> dict[str, float]:
    """The rule run ``reps`` times on per-seed differences ``effect + spread·X``, X of mean 0
    and sd 1 from ``dist`` (``_standard``): (reps, cap) draws, ``chunk`` rows at a time, look
    k using the first n_k. Returns the rates of BETTER, WORSE and of "undecided" at the cap,
    ``mean_seeds`` (seeds run until the rule stopped) and ``reps``. At effect 0 "better" is
    the false-"better" rate (nominal ≤ alpha / 2)."""
    from scipy.stats import t as student

    if reps < 1 or not spread >= 0:
        raise ValueError(f"needs reps >= 1 and spread >= 0, got {reps}, {spread}")
    ns = looks(design)
    crit = student.isf(boundaries(design, comparisons, calibrate) / 2, np.asarray(ns) - 1)
    better = worse = seeds = 0
    for done in range(0, reps, chunk):
        r = min(chunk, reps - done)
        x = effect + spread * _standard(rng, dist, (r, design.cap))
        open_ = np.ones(r, dtype=bool)
        for n, c in zip(ns, crit, strict=True):
            d = x[:, :n]
            with np.errstate(divide="ignore", invalid="ignore"):
                t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
            up, down = open_ & (t > c), open_ & (t < -c)
            better, worse = better + int(up.sum()), worse + int(down.sum())
            seeds += n * int((up | down).sum())
            open_ &= ~(up | down)
        seeds += design.cap * int(open_.sum())
    return {"better": better / reps, "worse": worse / reps,
            "undecided": 1 - (better + worse) / reps, "mean_seeds": seeds / reps, "reps": reps}
