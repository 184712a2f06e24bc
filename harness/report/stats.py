"""Over 500 lines on purpose: every statistic the pages show, in one module that one
independent re-implementation can check whole.

Statistics over per-seed scores: every interval the CLI and the web pages show.

Small pure functions over numpy arrays, in the style of rliable's ``metrics.py``.
Shapes are stated per function; ``n`` is the number of seeds. Only numpy and scipy
are imported here (no torch, no Django).

Conventions
-----------
* Inputs are per-seed scores of one (objective, suite, variant): a 1-D array of
  shape ``(n,)``. NaN or inf entries are an error: callers drop diverged seeds
  first (divergence is counted separately, in a stability column).
* Intervals of a **mean** and of a **paired difference** are Student-t intervals,
  ``mean ± t(1 − α/2, n − 1) · s/√n`` (of the per-seed differences for a paired
  comparison), and a paired comparison's verdict is the paired t-test at the same level.
  Measured coverage of the nominal 95% interval of the mean (paired differences in
  brackets: x and y share a seed effect of spread 5, noise of the kind named), 20,000
  seeded draws per cell; ``tests/engine/test_stats.py`` repeats this simulation and fails
  outside 93–97%:

  ==================================  ============  ============  ============
  per-seed noise                      3 seeds       5 seeds       10 seeds
  ==================================  ============  ============  ============
  normal                              94.9 (95.2)   95.1 (94.9)   95.2 (95.1)
  log-normal σ = 0.25 (skewness 0.8)  94.3 (95.4)   94.2 (95.0)   94.6 (95.3)
  Student-t, 3 d.o.f. (heavy tails)   96.3 (95.8)   96.0 (96.1)   96.1 (95.6)
  ==================================  ============  ============  ============

  With no true difference, "distinguishable" is declared 4.8% (normal), 4.5%
  (log-normal) and 4.0% (t) of the time at 5 seeds. Below the band, said here rather
  than hidden: strongly skewed scores (log-normal σ = 0.5, skewness 1.75: 92.6 / 91.6 /
  92.5% for the mean); no interval holds its level at 3–10 seeds there. The percentile
  bootstrap this module used before covered 75% / 85% / 89% at 3 / 5 / 10 normal seeds
  (plug-in spread, normal quantiles: too narrow for few seeds) and declared 16% of
  equal pairs distinguishable at 5 seeds.
* The probability of improvement keeps a paired percentile bootstrap (``seed`` fixed, so
  the same inputs always print the same table): it is a U-statistic with no t analogue.
* ``min_seeds``: with fewer seeds a summary has no interval and a comparison no verdict,
  only the values (a suite declares its minimum). A single seed never has an interval.
  Constant data (n >= 2, all equal) gets the exact zero-width interval ``(v, v)``.
* Many comparisons at once (every objective against the reference, or against the best)
  are Holm-corrected by :func:`holm_adjust`: the verdicts hold a 5% family-wise error
  rate; the intervals shown stay per-comparison 95% intervals.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "PairedComparison",
    "Summary",
    "compare_paired",
    "holm",
    "holm_adjust",
    "t_interval",
    "t_test",
    "iqm",
    "mean_ranks",
    "probability_of_improvement",
    "rank_intervals",
    "resolvable_difference",
    "summarize",
    "t_quantile",
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
class PairedComparison:
    """Paired comparison of x against y over seeds; positive ``mean_diff`` = x better.

    ``p_value``: the two-sided paired t-test of mean_diff = 0; ``p_adjusted``: the same,
    Holm-corrected when the comparison is one of a family (:func:`holm_adjust`; equal to
    ``p_value`` otherwise). ``distinguishable``: ``p_adjusted`` below 1 − confidence
    (for a lone comparison: the CI of ``mean_diff`` excludes 0).
    """

    n_pairs: int
    prob_improvement: float
    prob_ci_low: float
    prob_ci_high: float
    mean_diff: float
    diff_ci_low: float
    diff_ci_high: float
    distinguishable: bool
    p_value: float = _NAN
    p_adjusted: float = _NAN
    alpha: float = 0.05


def _scipy():
    """``scipy.stats``, imported when first needed: the import takes about a second, which
    every CLI command and worker start-up would pay even when it computes no statistic."""
    from scipy import stats

    return stats


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
    res = _scipy().bootstrap(
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


@functools.lru_cache(maxsize=256)
def t_quantile(q: float, df: int) -> float:
    """``t.ppf(q, df)``, remembered: scipy's call costs ~0.2 ms, and a table asks for the
    same few quantiles hundreds of times (the value is the same float either way)."""
    return float(_scipy().t.ppf(q, df))


def resolvable_difference(spread: float, n: int, comparisons: int = 1,
                          alpha: float = 0.05) -> float:
    """The smallest mean paired difference a two-sided paired t-test resolves at level
    ``alpha / comparisons`` (Bonferroni, Holm's first step) with ``n`` pairs whose
    differences have standard deviation ``spread``: ``t(1 − α/2m, n − 1) · s / √n``.
    A true difference of this size is resolved about half the time; smaller ones rarely."""
    if n < 2 or comparisons < 1:
        raise ValueError(f"needs n >= 2 pairs and comparisons >= 1, got {n}, {comparisons}")
    return t_quantile(1 - alpha / (2 * comparisons), n - 1) * spread / math.sqrt(n)


def t_interval(x: ArrayLike, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Student-t interval of the mean over the last axis of ``x`` (``(..., n)``, n >= 2):
    ``mean ± t(1 − α/2, n − 1)·s/√n``. Vectorized: the coverage simulation in the tests
    runs it on 20,000 samples at once; :func:`summarize` on one."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    half = t_quantile(0.5 + confidence / 2, n - 1) * np.std(x, axis=-1, ddof=1) / math.sqrt(n)
    m = np.mean(x, axis=-1)
    return m - half, m + half


def t_test(diff: ArrayLike) -> np.ndarray:
    """Two-sided p-value of the one-sample t-test of mean = 0 over the last axis of
    ``diff`` (``(..., n)``, n >= 2): the paired t-test of per-seed differences. Constant
    differences: 1 when all are 0, else 0 (an exact, noiseless difference)."""
    d = np.asarray(diff, dtype=float)
    n = d.shape[-1]
    mean, sd = np.mean(d, axis=-1), np.std(d, axis=-1, ddof=1)
    constant = np.all(d == d[..., :1], axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2.0 * _scipy().t.sf(np.abs(mean / (sd / math.sqrt(n))), n - 1)
    return np.where(constant, np.where(mean == 0, 1.0, 0.0), p)


def holm(p_values: ArrayLike) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the input's order (NaN stays NaN and does
    not count in the family). Rejecting where the adjusted value is below α keeps the
    family-wise error rate at α for any dependence between the tests (Holm 1979).
    Written out rather than taking statsmodels for one function: sort, scale by
    (m − rank), running maximum, clip at 1."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, _NAN)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out[order] = scaled
    return out


def holm_adjust(comparisons: Mapping[str, PairedComparison | None]
                ) -> dict[str, PairedComparison | None]:
    """The same comparisons with ``p_adjusted`` and ``distinguishable`` Holm-corrected
    over the family (the ones with a p-value); None stays None."""
    names = [k for k, c in comparisons.items() if c is not None and not math.isnan(c.p_value)]
    adjusted = holm([comparisons[k].p_value for k in names])  # type: ignore[union-attr]
    out = dict(comparisons)
    for name, p in zip(names, adjusted, strict=True):
        c = comparisons[name]
        assert c is not None
        out[name] = dataclasses.replace(c, p_adjusted=float(p),
                                        distinguishable=bool(p < c.alpha))
    return out


def iqm(values: ArrayLike) -> float:
    """Interquartile mean: mean of the middle 50% of scores.

    ``values``: (n,). Equals ``scipy.stats.trim_mean(values, 0.25)``, which trims
    ``int(0.25 * n)`` scores from each end (as rliable does). NaN for n = 0.
    """
    x = _scores(values)
    if x.size == 0:
        return _NAN
    return float(iqm_rows(x[None])[0])


def iqm_rows(x: np.ndarray) -> np.ndarray:
    """The IQM of each row of ``x`` (shape (r, n), n >= 1), as :func:`iqm` (a bootstrap's
    replicates at once). trim_mean's own steps (partition, mean of the middle), without its
    ~0.1 ms of argument handling per call: a table computes one per row."""
    n = x.shape[-1]
    low = int(0.25 * n)
    return np.partition(x, (low, n - low - 1), axis=-1)[..., low:n - low].mean(axis=-1)


def summarize(
    values: ArrayLike,
    *,
    confidence: float = 0.95,
    min_seeds: int = 2,
) -> Summary:
    """Mean, std, IQM and the Student-t CI of the mean over seeds.

    ``values``: (n,) per-seed scores, all finite (else ValueError).
    n = 0: every field NaN. n = 1: mean = iqm = the value, std and CI NaN.
    n < ``min_seeds``: the values' mean, std and IQM, no CI (NaN).
    Constant values: CI = (v, v) exactly.
    """
    x = _scores(values)
    n = int(x.size)
    if n == 0:
        return Summary(0, _NAN, _NAN, _NAN, _NAN, _NAN)
    if n == 1:
        v = float(x[0])
        return Summary(1, v, _NAN, _NAN, _NAN, v)
    mean, std = float(np.mean(x)), float(np.std(x, ddof=1))
    if n < min_seeds:
        return Summary(n, mean, std, _NAN, _NAN, iqm(x))
    if _is_constant(x):
        v = float(x[0])
        return Summary(n, v, 0.0, v, v, v)
    low, high = t_interval(x, confidence)
    return Summary(n=n, mean=mean, std=std, ci_low=float(low), ci_high=float(high), iqm=iqm(x))


def _poi(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Vectorized P(X > Y) + 0.5 P(X = Y) over all pairs, along ``axis``.

    Computed as the Mann-Whitney U statistic of x divided by n*m, from average ranks
    of the pooled sample: O((n+m) log(n+m)) instead of n*m comparisons.
    """
    x = np.moveaxis(x, axis, -1)
    y = np.moveaxis(y, axis, -1)
    n, m = x.shape[-1], y.shape[-1]
    ranks = _scipy().rankdata(np.concatenate([x, y], axis=-1), axis=-1)
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
    min_seeds: int = 2,
) -> PairedComparison:
    """Compares objective x with objective y on seeds aligned by position.

    ``x``, ``y``: (n,) scores where entry k of both comes from seed k (same init,
    data order and noise draw), so between-seed spread shared by x and y cancels out of
    the per-seed differences. mean_diff's CI is the Student-t interval of those
    differences and ``p_value`` their two-sided t-test; the PoI's CI is a paired
    percentile bootstrap (seed indices resampled once per replicate and applied to x and
    y together; each replicate's PoI skips its same-position pairs, see
    ``_paired_statistics``).

    prob_improvement: ``probability_of_improvement(x, y)`` (of -x, -y when lower is
    better). mean_diff: mean(x - y), or mean(y - x) when lower is better, so that
    positive always means x is better. distinguishable: p < 1 − confidence, i.e. the
    diff CI excludes 0. n = 0: NaN fields; n = 1 or n < ``min_seeds``: NaN CIs and
    p-value; never distinguishable without them.
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
        return PairedComparison(0, _NAN, _NAN, _NAN, _NAN, _NAN, _NAN, False)
    prob = float(_poi(xs, ys))
    diff = xs - ys
    mean_diff = float(np.mean(diff))
    alpha = round(1.0 - confidence, 12)
    if n < max(2, min_seeds):
        return PairedComparison(n, prob, _NAN, _NAN, mean_diff, _NAN, _NAN, False, alpha=alpha)
    low, high = _percentile_ci(
        (xs, ys),
        _paired_statistics,
        paired=True,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
    )
    if _is_constant(diff):  # exact zero-width interval, free of summation rounding
        mean_diff = diff_low = diff_high = float(diff[0])
    else:
        diff_low, diff_high = (float(v) for v in t_interval(diff, confidence))
    p = float(t_test(diff))
    return PairedComparison(
        n_pairs=n,
        prob_improvement=prob,
        prob_ci_low=float(low[0]),
        prob_ci_high=float(high[0]),
        mean_diff=mean_diff,
        diff_ci_low=diff_low,
        diff_ci_high=diff_high,
        distinguishable=p < alpha,
        p_value=p,
        p_adjusted=p,
        alpha=alpha,
    )


def tied_with_best(
    scores: Mapping[str, ArrayLike],
    *,
    higher_is_better: bool = True,
    confidence: float = 0.95,
    min_seeds: int = 2,
) -> list[str]:
    """Names statistically indistinguishable from the best, best first.

    ``scores``: name -> (n,) per-seed scores, all of the same length n and aligned
    by seed position (ValueError otherwise). The best has the highest mean (lowest
    when lower is better; the first such name on a tie). Every other name is
    compared with the best by ``compare_paired``, the family Holm-corrected
    (:func:`holm_adjust`); it is tied unless its corrected verdict is distinguishable.
    The result is ordered best mean first. Empty mapping -> []; n < ``min_seeds`` ->
    every name (no verdict).
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
    verdicts = holm_adjust({name: compare_paired(arrays[best], arrays[name],
                                                 higher_is_better=higher_is_better,
                                                 confidence=confidence, min_seeds=min_seeds)
                            for name in by_mean[1:]})
    return [best, *(name for name in by_mean[1:]
                    if not verdicts[name].distinguishable)]  # type: ignore[union-attr]


def rank_intervals(
    scores: Mapping[str, ArrayLike],
    *,
    higher_is_better: bool = True,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, tuple[int, int]]:
    """How sure a table's order is: each name's rank (1 = best mean) with a bootstrap
    interval. Per replicate every name's seeds are resampled on their own (names may have
    different seeds), the means ranked (rank = 1 + the number of strictly better means);
    the interval is the replicates' ``(α/2, 1 − α/2)`` quantiles of each name's rank.

    ``scores``: name -> (n,) per-seed scores, n >= 1 (a name with one seed keeps its one
    mean in every replicate). Returns name -> (low, high), 1 <= low <= high <= len.
    """
    arrays = {name: _scores(v, name) for name, v in scores.items()}
    if not arrays:
        return {}
    empty = [name for name, a in arrays.items() if a.size == 0]
    if empty:
        raise ValueError(f"no scores to rank for {', '.join(empty)}")
    rng = np.random.default_rng(seed)
    sign = 1.0 if higher_is_better else -1.0
    means = np.stack([sign * a[rng.integers(0, a.size, (n_resamples, a.size))].mean(axis=1)
                      for a in arrays.values()])  # (names, replicates)
    # 1 + the number of strictly better means = the "min" rank of the negated means: a sort
    # per replicate instead of comparing every pair (the same integers, far fewer steps)
    ranks = _scipy().rankdata(-means, method="min", axis=0).astype(np.int64)  # (names, replicates)
    alpha = 1.0 - confidence
    low = np.floor(np.quantile(ranks, alpha / 2, axis=1)).astype(int)
    high = np.ceil(np.quantile(ranks, 1 - alpha / 2, axis=1)).astype(int)
    return {name: (int(lo), int(hi)) for name, lo, hi in zip(arrays, low, high, strict=True)}


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
        ranks = _scipy().rankdata(-values if higher_is_better else values)
        for name, r in zip(names, ranks, strict=True):
            rank_sum[name] += float(r)
            count[name] += 1
    return {name: rank_sum[name] / count[name] if count[name] else _NAN for name in table}
