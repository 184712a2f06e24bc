"""Statistics over per-seed scores: every interval the CLI and the web pages show.

Small pure functions over numpy arrays, in the style of rliable's ``metrics.py``.
Shapes are stated per function; ``n`` is the number of seeds. Only numpy and scipy
are imported here (no torch, no Django).

Conventions
-----------
* Inputs are per-seed scores of one (objective, suite, variant): a 1-D array of
  shape ``(n,)``. NaN or inf entries are an error: callers drop diverged seeds
  first (divergence is counted separately, in a stability column).
* Confidence intervals are **percentile bootstrap** intervals from
  ``scipy.stats.bootstrap`` with a fixed ``seed``, so the same inputs always print
  the same table. Percentile rather than BCa: BCa needs a jackknife acceleration
  that is undefined (and warns / returns NaN) on constant or nearly discrete data,
  which is common for accuracies over 3..10 seeds; percentile is defined for every
  non-constant sample with n >= 2. Its price: for small n it is slightly too narrow
  (roughly 90% actual coverage of a nominal 95% CI at n=10 for normal data), because
  it uses the plug-in spread and normal-like quantiles rather than Student-t.
* A single seed has no spread to resample: its CI is ``(nan, nan)``, never a
  zero-width interval that would look certain. Constant data (n >= 2, all equal)
  gets the exact zero-width CI ``(v, v)`` without calling the bootstrap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

__all__ = [
    "Comparison",
    "Summary",
    "compare_paired",
    "iqm",
    "mean_ranks",
    "probability_of_improvement",
    "summarize",
    "tied_with_best",
]

_NAN = math.nan


@dataclass(frozen=True)
class Summary:
    """Mean over seeds with its bootstrap CI. ``std`` uses ddof=1 (NaN if n < 2)."""

    n: int
    mean: float
    std: float
    ci_low: float
    ci_high: float
    iqm: float


@dataclass(frozen=True)
class Comparison:
    """Paired comparison of x against y over seeds; positive ``mean_diff`` = x better.

    ``distinguishable`` is True iff the CI of ``mean_diff`` excludes 0.
    """

    n_pairs: int
    prob_improvement: float
    prob_ci_low: float
    prob_ci_high: float
    mean_diff: float
    diff_ci_low: float
    diff_ci_high: float
    distinguishable: bool


def _scores(values: ArrayLike, name: str = "values") -> np.ndarray:
    """Validates per-seed scores and returns them as a float array of shape (n,)."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of per-seed scores, got shape {x.shape}")
    bad = int(np.count_nonzero(~np.isfinite(x)))
    if bad:
        raise ValueError(
            f"{name} contains {bad} NaN/inf of {x.size} entries; "
            "drop diverged seeds before computing statistics"
        )
    return x


def _is_constant(x: np.ndarray) -> bool:
    return x.size > 0 and bool(np.all(x == x[0]))


def _percentile_ci(
    data: tuple[np.ndarray, ...],
    statistic,
    *,
    paired: bool,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of a vectorized ``statistic(*data, axis=-1)``.

    Each array in ``data`` has shape (n,); the statistic may return a scalar or a
    stack of k statistics, shape (k, ...). Returns (low, high), each of shape () or (k,).
    """
    res = stats.bootstrap(
        data,
        statistic,
        paired=paired,
        vectorized=True,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)


def iqm(values: ArrayLike) -> float:
    """Interquartile mean: mean of the middle 50% of scores.

    ``values``: (n,). Equals ``scipy.stats.trim_mean(values, 0.25)``, which trims
    ``int(0.25 * n)`` scores from each end (as rliable does). NaN for n = 0.
    """
    x = _scores(values)
    if x.size == 0:
        return _NAN
    return float(stats.trim_mean(x, 0.25))


def summarize(
    values: ArrayLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Summary:
    """Mean, std, IQM and percentile-bootstrap CI of the mean over seeds.

    ``values``: (n,) per-seed scores, all finite (else ValueError).
    n = 0: every field NaN. n = 1: mean = iqm = the value, std and CI NaN.
    Constant values: CI = (v, v) exactly, no bootstrap, no warnings.
    """
    x = _scores(values)
    n = int(x.size)
    if n == 0:
        return Summary(0, _NAN, _NAN, _NAN, _NAN, _NAN)
    if n == 1:
        v = float(x[0])
        return Summary(1, v, _NAN, _NAN, _NAN, v)
    if _is_constant(x):
        v = float(x[0])
        return Summary(n, v, 0.0, v, v, v)
    low, high = _percentile_ci(
        (x,), np.mean, paired=False, confidence=confidence, n_resamples=n_resamples, seed=seed
    )
    return Summary(
        n=n,
        mean=float(np.mean(x)),
        std=float(np.std(x, ddof=1)),
        ci_low=float(low),
        ci_high=float(high),
        iqm=iqm(x),
    )


def _poi(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Vectorized P(X > Y) + 0.5 P(X = Y) over all pairs, along ``axis``.

    Computed as the Mann-Whitney U statistic of x divided by n*m, from average ranks
    of the pooled sample: O((n+m) log(n+m)) instead of n*m comparisons.
    """
    x = np.moveaxis(x, axis, -1)
    y = np.moveaxis(y, axis, -1)
    n, m = x.shape[-1], y.shape[-1]
    ranks = stats.rankdata(np.concatenate([x, y], axis=-1), axis=-1)
    u = ranks[..., :n].sum(axis=-1) - n * (n + 1) / 2
    return u / (n * m)


def probability_of_improvement(x: ArrayLike, y: ArrayLike) -> float:
    """P(X > Y) + 0.5 P(X = Y) for scores where higher is better (rliable).

    ``x``: (n,), ``y``: (m,); all n*m pairs are compared, so x and y need not be
    aligned. Equals the Mann-Whitney U statistic of x divided by n*m.
    0.5 = no difference; 1.0 = every x beats every y. NaN if x or y is empty.
    """
    xs, ys = _scores(x, "x"), _scores(y, "y")
    if xs.size == 0 or ys.size == 0:
        return _NAN
    return float(_poi(xs, ys))


def _paired_statistics(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Per paired-bootstrap replicate: stacked [PoI, mean(x - y)], shape (2, ...).

    ``x``, ``y``: (..., n) with n >= 2, resampled with the same seed indices. The PoI
    of a replicate leaves out its n same-position pairs (x*_k, y*_k). Those always
    come from one seed, whose shared effect cancels in them, so they are not like the
    cross-seed pairs; keeping them would give same-seed pairs weight about 2/n
    instead of the 1/n they have in the data and shift the interval towards their
    verdict (at n=10 the naive interval can exclude the point estimate).
    Without them, the mean of the replicates over all resamples equals
    ``probability_of_improvement(x, y)`` exactly.
    """
    x = np.moveaxis(x, axis, -1)
    y = np.moveaxis(y, axis, -1)
    n = x.shape[-1]
    same_position = ((x > y) + 0.5 * (x == y)).sum(axis=-1)
    poi_off_diagonal = (n * n * _poi(x, y) - same_position) / (n * (n - 1))
    return np.stack([poi_off_diagonal, np.mean(x - y, axis=-1)])


def compare_paired(
    x: ArrayLike,
    y: ArrayLike,
    *,
    higher_is_better: bool = True,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Compares objective x with objective y on seeds aligned by position.

    ``x``, ``y``: (n,) scores where entry k of both comes from seed k (same init,
    data order and noise draw). Both CIs come from one **paired** percentile
    bootstrap: seed indices are resampled once per replicate and applied to x and y
    together, so between-seed spread shared by x and y cancels out of the difference.
    (Each replicate's PoI skips its same-position pairs; see ``_paired_statistics``.)

    prob_improvement: ``probability_of_improvement(x, y)`` (of -x, -y when lower is
    better). mean_diff: mean(x - y), or mean(y - x) when lower is better, so that
    positive always means x is better. distinguishable: the diff CI excludes 0.
    n = 0: NaN fields; n = 1: NaN CIs; never distinguishable without a CI.
    """
    xs, ys = _scores(x, "x"), _scores(y, "y")
    if xs.size != ys.size:
        raise ValueError(
            "x and y must hold the same seeds in the same order; "
            f"got len(x)={xs.size} and len(y)={ys.size}"
        )
    if not higher_is_better:
        xs, ys = -xs, -ys
    n = int(xs.size)
    if n == 0:
        return Comparison(0, _NAN, _NAN, _NAN, _NAN, _NAN, _NAN, False)
    prob = float(_poi(xs, ys))
    diff = xs - ys
    mean_diff = float(np.mean(diff))
    if n == 1:
        return Comparison(1, prob, _NAN, _NAN, mean_diff, _NAN, _NAN, False)
    low, high = _percentile_ci(
        (xs, ys),
        _paired_statistics,
        paired=True,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
    )
    diff_low, diff_high = float(low[1]), float(high[1])
    if _is_constant(diff):  # exact zero-width interval, free of summation rounding
        mean_diff = diff_low = diff_high = float(diff[0])
    return Comparison(
        n_pairs=n,
        prob_improvement=prob,
        prob_ci_low=float(low[0]),
        prob_ci_high=float(high[0]),
        mean_diff=mean_diff,
        diff_ci_low=diff_low,
        diff_ci_high=diff_high,
        distinguishable=diff_low > 0 or diff_high < 0,
    )


def tied_with_best(
    scores: Mapping[str, ArrayLike],
    *,
    higher_is_better: bool = True,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> list[str]:
    """Names statistically indistinguishable from the best, best first.

    ``scores``: name -> (n,) per-seed scores, all of the same length n and aligned
    by seed position (ValueError otherwise). The best has the highest mean (lowest
    when lower is better; the first such name on a tie). Every other name is
    compared with the best by ``compare_paired``; it is tied when the paired diff
    CI contains 0. The result is ordered best mean first. Each comparison is a
    separate 95% CI (no multiplicity correction), so with many candidates a few may
    be excluded by chance. Empty mapping -> []; n = 0 or 1 -> every name.
    """
    arrays = {name: _scores(v, name) for name, v in scores.items()}
    lengths = {name: a.size for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(
            f"all objectives must have the same seeds in the same order; got lengths {lengths}"
        )
    if not arrays:
        return []
    sign = 1.0 if higher_is_better else -1.0
    if next(iter(lengths.values())) == 0:
        return list(arrays)
    by_mean = sorted(arrays, key=lambda k: -sign * float(np.mean(arrays[k])))  # stable
    best = by_mean[0]
    tied = [best]
    for name in by_mean[1:]:
        c = compare_paired(
            arrays[best],
            arrays[name],
            higher_is_better=higher_is_better,
            confidence=confidence,
            n_resamples=n_resamples,
            seed=seed,
        )
        if not c.distinguishable:
            tied.append(name)
    return tied


def mean_ranks(
    table: Mapping[str, Mapping[str, float]],
    *,
    higher_is_better: bool = True,
) -> dict[str, float]:
    """Average rank of each objective across columns (tasks or variants).

    ``table``: objective -> {column: score}. In each column the objectives that
    have a value there are ranked (1 = best; ties share the average rank,
    ``scipy.stats.rankdata``); a missing or NaN value means "no value", so the
    objective is neither ranked nor penalised in that column. Returns objective ->
    mean of its ranks, NaN if it has no value anywhere; keys in input order.
    """
    columns: dict[str, None] = {}
    for row in table.values():
        columns.update(dict.fromkeys(row))
    rank_sum = dict.fromkeys(table, 0.0)
    count = dict.fromkeys(table, 0)
    for col in columns:
        names = [
            name
            for name, row in table.items()
            if col in row and row[col] is not None and math.isfinite(row[col])
        ]
        if not names:
            continue
        values = np.array([table[name][col] for name in names], dtype=float)
        ranks = stats.rankdata(-values if higher_is_better else values)
        for name, r in zip(names, ranks, strict=True):
            rank_sum[name] += float(r)
            count[name] += 1
    return {name: rank_sum[name] / count[name] if count[name] else _NAN for name in table}
