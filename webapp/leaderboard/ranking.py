"""Two views of how objectives compare over a suite's ranked variants, beside its score.

- **Performance profiles** (Dolan & Moré 2002; AlgoPerf, Dahl et al. 2023, §4.5): for
  each objective, the share of the ranked variants on which its normalized headline is
  within τ of the best objective's, as τ grows. AlgoPerf's ratio of times becomes a
  difference of normalized scores here (a score is 0 at the suite's worst anchor and 1 at
  its best, so the difference is comparable across variants). A profile that reaches 1
  early is never far from the best; a mean hides which variants the loss was on.
- **Critical-difference diagram** (Demšar 2006, §3.2.2): objectives' mean ranks over the
  ranked variants, the Friedman test of "all equal", and the Nemenyi critical difference
  CD = q_α · sqrt(k (k + 1) / (6 N)); objectives whose mean ranks differ by less than CD
  are not told apart, drawn as joined groups. With N = 4 variants and k = 15 objectives
  CD is about 10.7 ranks: the diagram says how little four variants can separate.

Both use ranked objectives only (every ranked variant with the minimum of seeds), so
every objective is measured on the same variants.
"""

from __future__ import annotations

import math

import numpy as np

ALPHA = 0.05
TAU_POINTS = 41  # the τ grid of a profile, from 0 to the largest gap


def ranked_matrix(summary: dict) -> tuple[list[dict], list[str], np.ndarray]:
    """The ranked rows, the ranked variants and their normalized scores ``[k, N]``."""
    variants = list(summary.get("ranked") or [])
    rows = [r for r in summary["rows"] if r.get("ranked")]
    if not variants or not rows:
        return [], variants, np.zeros((0, len(variants)))
    scores = np.array([[r["by_variant"][v] for v in variants] for r in rows], dtype=float)
    return rows, variants, scores


def performance_profiles(summary: dict) -> dict | None:
    """Per ranked objective, ρ(τ) on a shared τ grid, or None with fewer than 2 objectives.

    ``gap[o, v] = max_o' score[o', v] − score[o, v]`` (normalized, ≥ 0); ``ρ_o(τ)`` is the
    share of variants with ``gap ≤ τ``."""
    rows, variants, scores = ranked_matrix(summary)
    if len(rows) < 2:
        return None
    gaps = scores.max(axis=0, keepdims=True) - scores
    top = float(gaps.max())
    taus = np.linspace(0.0, top if top > 0 else 1.0, TAU_POINTS)
    # ρ for every objective and τ at once: the same means of 0/1 as one τ at a time
    rho = (gaps[:, :, None] <= taus[None, None, :] + 1e-12).mean(axis=1)
    return {"variants": variants, "tau": [round(float(t), 6) for t in taus],
            "objectives": [{
                "label": r["objective"], "is_reference": r["is_reference"],
                "rho": [float(x) for x in rho[i]],
                "wins": int(np.sum(gaps[i] <= 1e-12)),
                "worst_gap": round(float(gaps[i].max()), 6)}
                for i, r in enumerate(rows)]}


def critical_difference(summary: dict, alpha: float = ALPHA) -> dict | None:
    """Mean ranks (1 = best, ties share their places), the Friedman test over the ranked
    variants and the Nemenyi CD with the groups it cannot separate; None with fewer than 2
    objectives or 2 variants."""
    import scipy.stats  # here: a second to import, which the CLI's commands need not pay

    rows, variants, scores = ranked_matrix(summary)
    k, n = len(rows), len(variants)
    if k < 2 or n < 2:
        return None
    ranks = np.column_stack([scipy.stats.rankdata(-scores[:, j]) for j in range(n)])
    mean = ranks.mean(axis=1)
    friedman_p = _friedman(scores)
    q = scipy.stats.studentized_range.ppf(1 - alpha, k, math.inf) / math.sqrt(2)
    cd = float(q * math.sqrt(k * (k + 1) / (6 * n)))
    order = np.argsort(mean, kind="stable")
    return {"variants": variants, "alpha": alpha, "cd": round(cd, 4),
            "friedman_p": friedman_p,
            "objectives": [{"label": rows[i]["objective"],
                            "is_reference": rows[i]["is_reference"],
                            "mean_rank": round(float(mean[i]), 4)} for i in order],
            "groups": cliques([float(mean[i]) for i in order], cd)}


def cliques(sorted_ranks: list[float], cd: float) -> list[list[int]]:
    """Demšar's bars: maximal runs of consecutive objectives (by mean rank) whose ranks
    span less than ``cd``, as index ranges ``[first, last]``; single objectives are not
    groups."""
    groups: list[list[int]] = []
    for i in range(len(sorted_ranks)):
        j = i
        while j + 1 < len(sorted_ranks) and sorted_ranks[j + 1] - sorted_ranks[i] < cd:
            j += 1
        if j > i and not (groups and groups[-1][1] >= j):  # not inside the previous run
            groups.append([i, j])
    return groups


def _friedman(scores: np.ndarray) -> float | None:
    """Friedman's p-value that every objective ranks alike (needs 3 objectives); None
    where it is undefined (every variant ranks all objectives equal)."""
    if scores.shape[0] < 3:
        return None
    import scipy.stats

    with np.errstate(all="ignore"):
        try:
            p = scipy.stats.friedmanchisquare(*scores).pvalue
        except ValueError:
            return None
    return float(p) if np.isfinite(p) else None
