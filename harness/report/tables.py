"""Per-variant tables with seed statistics: one place that computes what is shown.

Input is tidy: one :class:`CellRow` per (objective, variant, seed). Output rows
carry the headline's mean and 95% CI, seed and divergence counts, the comparison
with the reference objective on paired seeds, and whether the objective is
statistically tied with the best. :func:`across_variants` summarizes an objective over
several variants: the mean of its per-variant headline means and its worst variant.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field

import numpy as np

from harness.report import stats


@dataclass(frozen=True)
class CellRow:
    objective: str
    variant: str
    seed: int
    status: str
    metrics: dict[str, float]
    track: str = ""  # the suite's track the judge put the cell in (Suite.tracks), if any


@dataclass
class TableRow:
    objective: str
    seeds: int
    diverged: int
    failed: int
    summary: stats.Summary
    secondary: dict[str, float] = field(default_factory=dict)
    vs_reference: stats.PairedComparison | None = None
    tied_with_best: bool = False
    is_reference: bool = False
    # 95% bootstrap interval of the row's rank among the rows with enough seeds
    rank_interval: tuple[int, int] | None = None


@dataclass(frozen=True)
class AcrossRow:
    """An objective over several variants: per-variant headline means (over ok seeds),
    their mean, and the worst of them by the metric's direction."""

    objective: str
    means: dict[str, float]
    mean: float
    worst: float
    worst_variant: str
    is_reference: bool = False


def worst_variant(means: Mapping[str, float], higher_is_better: bool) -> tuple[str, float] | None:
    """(variant, value) of the worst per-variant mean: the smallest when higher is better,
    the largest when lower is better (the first in order among equals); None if empty."""
    if not means:
        return None
    pick = min if higher_is_better else max
    name = pick(means, key=lambda v: means[v])
    return name, means[name]


def across_variants(rows: Iterable[CellRow], variants: list[str], *, headline: str,
                    higher_is_better: bool, reference: str = ""
                    ) -> tuple[list[AcrossRow], list[str]]:
    """Rows (best mean first) of the objectives with an ok headline on every one of
    ``variants``, and the names of the objectives left out for missing some."""
    cells: dict[str, dict[str, list[CellRow]]] = {}
    for r in rows:
        if r.variant in variants:
            cells.setdefault(r.objective, {}).setdefault(r.variant, []).append(r)
    out, left_out = [], []
    for name, by_variant in cells.items():
        scores = {v: _scores(by_variant.get(v, []), headline) for v in variants}
        if not all(scores.values()):
            left_out.append(name)
            continue
        means = {v: float(np.mean(list(s.values()))) for v, s in scores.items()}
        variant, value = worst_variant(means, higher_is_better)
        out.append(AcrossRow(name, means, float(np.mean(list(means.values()))), value, variant,
                             is_reference=name == reference))
    sign = 1 if higher_is_better else -1
    return sorted(out, key=lambda r: (-sign * r.mean, r.objective)), sorted(left_out)


Memo = MutableMapping[str, stats.PairedComparison]


def variant_tables(rows: Iterable[CellRow], *, headline: str, higher_is_better: bool,
                   reference: str, secondary: tuple[str, ...] = (),
                   min_seeds: int = 3, memo: Memo | None = None) -> dict[str, list[TableRow]]:
    """{variant: rows sorted best first} from tidy cell rows. A row with fewer than
    ``min_seeds`` seeds shows its values only: no interval, no verdict, no ★.

    ``memo``: paired comparisons already computed, by :func:`comparison_key` (read and
    filled here). A comparison is a pure function of its two value lists, so a table
    rebuilt after one objective's new cell recomputes only that objective's comparisons."""
    by_variant: dict[str, dict[str, list[CellRow]]] = {}
    for r in rows:
        by_variant.setdefault(r.variant, {}).setdefault(r.objective, []).append(r)
    return {v: _table(objs, headline, higher_is_better, reference, secondary, min_seeds, memo)
            for v, objs in by_variant.items()}


def comparison_key(x: list[float], y: list[float], higher: bool, min_seeds: int) -> str:
    """What :func:`harness.report.stats.compare_paired` depends on, hashed: the exact values
    (``repr`` round-trips a float), the direction and the minimum of seeds."""
    text = f"{higher}:{min_seeds}:{','.join(map(repr, x))}|{','.join(map(repr, y))}"
    return hashlib.sha1(text.encode()).hexdigest()


def _table(objs: dict[str, list[CellRow]], headline: str, higher: bool, reference: str,
           secondary: tuple[str, ...], min_seeds: int,
           memo: Memo | None = None) -> list[TableRow]:
    scores = {name: _scores(cells, headline) for name, cells in objs.items()}
    rows = []
    for name, cells in objs.items():
        ok = [c for c in cells if c.status == "ok"]
        rows.append(TableRow(
            objective=name, seeds=len(ok),
            diverged=sum(c.status == "diverged" for c in cells),
            failed=sum(c.status not in ("ok", "diverged") for c in cells),
            summary=stats.summarize(list(scores[name].values()), min_seeds=min_seeds),
            secondary={m: _mean(ok, m) for m in secondary},
            is_reference=name == reference))
    if reference in scores:  # every objective against the reference: one Holm family
        versus = stats.holm_adjust({r.objective: _compare(scores[r.objective],
                                                          scores[reference], higher, min_seeds,
                                                          memo)
                                    for r in rows if r.objective != reference})
        for r in rows:
            r.vs_reference = versus.get(r.objective)
    sign = 1 if higher else -1
    # ★ and the rank interval are one statement: ★ = the row's 95% bootstrap rank interval
    # reaches 1 (it could be the best at these seeds); a row with too few seeds gets neither
    judged = [r for r in rows if r.seeds >= min_seeds]
    if judged:
        ranks = stats.rank_intervals({r.objective: list(scores[r.objective].values())
                                      for r in judged}, higher_is_better=higher)
        for r in judged:
            r.rank_interval = ranks[r.objective]
            r.tied_with_best = r.rank_interval[0] == 1
    return sorted(rows, key=lambda r: (not r.seeds, -sign * r.summary.mean
                                       if r.seeds else 0, r.objective))


def _scores(cells: list[CellRow], metric: str) -> dict[int, float]:
    return {c.seed: c.metrics[metric] for c in cells
            if c.status == "ok" and metric in c.metrics and np.isfinite(c.metrics[metric])}


def _compare(x: dict[int, float], y: dict[int, float], higher: bool,
             min_seeds: int = 2, memo: Memo | None = None) -> stats.PairedComparison | None:
    common = sorted(set(x) & set(y))
    if len(common) < 2:
        return None
    xs, ys = [x[s] for s in common], [y[s] for s in common]
    if memo is None:
        return stats.compare_paired(xs, ys, higher_is_better=higher, min_seeds=min_seeds)
    key = comparison_key(xs, ys, higher, min_seeds)
    found = memo.get(key)
    if found is None:
        found = memo[key] = stats.compare_paired(xs, ys, higher_is_better=higher,
                                                 min_seeds=min_seeds)
    return found


def _mean(cells: list[CellRow], metric: str) -> float:
    vals = [c.metrics[metric] for c in cells if metric in c.metrics]
    return float(np.mean(vals)) if vals else float("nan")


def resolvable(intervals: list[tuple[float, float, int]]) -> dict | None:
    """The smallest improvement over the reference a table's verdicts resolve at its seed
    count (:func:`harness.report.stats.resolvable_difference`), from the table's 95%
    Student-t intervals of the paired improvements, ``(low, high, n pairs)`` per objective
    compared: ``m`` = their number (Holm's first step; its later steps are laxer, down to
    the uncorrected test), the median number of pairs, the median spread of the per-seed
    improvements (each interval's half-width is t(0.975, n−1)·s/√n). A difference under
    it reads "not resolved" even where it is real."""
    usable = [(lo, hi, n) for lo, hi, n in intervals
              if n >= 2 and lo is not None and hi is not None
              and np.isfinite(lo) and np.isfinite(hi)]
    if not usable:
        return None
    n = int(np.median([k for _, _, k in usable]))
    spread = float(np.median([(hi - lo) / 2 / stats.t_quantile(0.975, k - 1) * np.sqrt(k)
                              for lo, hi, k in usable]))
    return {"difference": stats.resolvable_difference(spread, n, len(usable)),
            "uncorrected": stats.resolvable_difference(spread, n),
            "spread": spread, "seeds": n, "compared": len(usable)}
