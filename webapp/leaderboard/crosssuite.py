"""An objective's profile across suites: per suite its improvement over the reference with
the verdict, its normalized score and its rank among the suite's baselines, then the one
aggregate (:mod:`harness.report.aggregate`) over the suites it is scored on.

What ``harness profile``, ``harness.api.profile`` and the objective page show: one payload,
built from the suite summaries every other page reads, so the numbers are the same
everywhere. Ranks here are among the suite's own baselines (the same set whoever else has
submitted), each suite on its ranked variants and the suite's seeds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.contract.registry import all_suites
from harness.contract.suite import Suite
from harness.report import aggregate
from harness.report.tables import resolvable
from webapp.leaderboard.boards import RANK_METHOD, ranked_scores, scorable, summaries
from webapp.leaderboard.lookup import suite_meta
from webapp.leaderboard.state import states_of

AGGREGATE_RULE = "Score: " + RANK_METHOD
RANK_RULE = ("rank among the suite's baselines by the suite's score, with its 95% bootstrap "
             "interval; = when the seeds cannot separate it from the best")


def profile_table(slug: str, *, label: str | None = None,
                  suites: Sequence[Suite] | None = None) -> dict:
    """The profile of objective ``slug`` (its version labelled ``label``, else the one at its
    defaults, else its first) on ``suites`` (default: every suite it has results in).

    Per suite: ``status`` "scored" (ranked: the suite's minimum of seeds on every ranked
    variant), "provisional" (results, not enough for a score) or "missing" (no result; only
    when ``suites`` names it), the summary's improvement over the reference with its CI and
    ``verdict`` ("better", "worse", "not resolved", "reference"), the resolvable difference
    at its seed count, ``score`` with its interval, ``rank`` among the baselines with
    ``rank_low``/``rank_high`` and ``of``, ``seeds`` (per ranked variant: the objective's
    normalized score per seed) and ``band`` (per ranked variant: the lowest and highest
    baseline mean and the reference's). ``aggregate``: over the scored suites, or None.
    """
    asked = list(suites) if suites is not None else list(all_suites())
    found = summaries(states_of(asked))
    out, scored = [], {}
    for suite in asked:
        summary = found[suite.name]
        rows = summary["rows"]
        mine = _pick([r for r in rows if r["slug"] == slug], label)
        if mine is None and suites is None:
            continue
        entry = _suite_entry(suite, summary, mine, rows)
        if entry["status"] == "scored":
            scored[suite.name] = ranked_scores(mine)
        out.append(entry)
    total = None
    if scored:
        agg = aggregate.aggregate(scored)
        total = {"score": agg.score, "score_low": agg.ci_low, "score_high": agg.ci_high,
                 "suites": list(scored), "n": agg.seeds}
    left = [e["suite"] for e in out if e["status"] != "scored"]
    label = next((e["objective"] for e in out if e["objective"]), label)
    return {"slug": slug, "label": label, "suites": out, "aggregate": total,
            "unscored": left, "aggregate_rule": AGGREGATE_RULE, "rank_rule": RANK_RULE}


def _pick(rows: list[dict], label: str | None) -> dict | None:
    if label is not None:
        return next((r for r in rows if r["label"] == label), None)
    return next((r for r in rows if r["label"] == r["name"]), rows[0] if rows else None)


def _suite_entry(suite: Suite, summary: dict, mine: dict | None, rows: list[dict]) -> dict:
    meta = suite_meta(suite)
    entry = {k: meta[k] for k in ("suite", "suite_version", "headline", "headline_label",
                                  "headline_short", "headline_spec", "percent", "better",
                                  "higher_is_better")}
    entry.update(reference=summary["reference"], variants=list(suite.ranked_variants),
                 min_seeds=suite.min_seeds, objective=mine["objective"] if mine else None,
                 status="missing", improvement=None, improvement_ci_low=None,
                 improvement_ci_high=None, improvement_seeds=0, verdict=None,
                 resolvable=resolvable(summary_intervals(rows)), score=None, score_low=None,
                 score_high=None, rank=None, rank_low=None, rank_high=None, of=None,
                 tied=False, seeds={}, band=_band(rows, suite))
    if mine is None:
        return entry
    entry.update(status="scored" if scorable(mine) else "provisional",
                 improvement=mine["improvement"],
                 improvement_ci_low=_finite(mine["improvement_ci_low"]),
                 improvement_ci_high=_finite(mine["improvement_ci_high"]),
                 improvement_seeds=mine["improvement_seeds"], verdict=verdict(mine))
    if entry["status"] != "scored":
        return entry
    field = {"__mine__": ranked_scores(mine)}
    field.update({r["slug"]: ranked_scores(r) for r in _baselines(rows, suite)
                  if r["slug"] != mine["slug"] and scorable(r)})
    placed = aggregate.ranked({k: {suite.name: v} for k, v in field.items()})
    me = next(p for p in placed if p.name == "__mine__")
    best = placed[0].tie_group
    entry.update(score=me.aggregate.score, score_low=me.aggregate.ci_low,
                 score_high=me.aggregate.ci_high, rank=me.rank, rank_low=me.rank_low,
                 rank_high=me.rank_high, of=len(placed), tied=me.tie_group == best,
                 seeds={v: x.tolist() for v, x in field["__mine__"].items()})
    return entry


def verdict(row: dict) -> str | None:
    """The one verdict of an objective against the suite's reference, as the suite page
    and the home page give it: the paired t-test, Holm-corrected over the suite's
    objectives (``distinguishable``), signed by the improvement."""
    if row["is_reference"]:
        return "reference"
    if row["improvement"] is None or _finite(row["improvement_ci_low"]) is None:
        return None  # too few paired seeds for a verdict
    if not row["distinguishable"]:
        return "not resolved"
    return "better" if row["improvement"] > 0 else "worse"


def summary_intervals(rows: list[dict]) -> list[tuple[float, float, int]]:
    """A suite summary's improvement intervals, for :func:`resolvable`."""
    return [(r["improvement_ci_low"], r["improvement_ci_high"], r["improvement_seeds"])
            for r in rows if not r["is_reference"] and r["improvement_ci_low"] is not None]


def table_intervals(rows: list[dict]) -> list[tuple[float, float, int]]:
    """A variant table's intervals of the improvement over the reference."""
    return [(r["vs_reference"]["diff_ci_low"], r["vs_reference"]["diff_ci_high"],
             r["vs_reference"]["n_pairs"]) for r in rows if r.get("vs_reference")]


def _baselines(rows: list[dict], suite: Suite) -> list[dict]:
    """The summary rows of the suite's built-in baselines at their defaults."""
    return [r for r in rows if r["is_builtin"] and r["name"] in suite.baselines
            and r["label"] == r["name"]]


def _band(rows: list[dict], suite: Suite) -> dict:
    """Per ranked variant, the baselines' normalized means: lowest, highest, reference."""
    out = {}
    for variant in suite.ranked_variants:
        means = {r["name"]: r["by_variant"][variant] for r in _baselines(rows, suite)
                 if variant in (r.get("by_variant") or {})}
        if means:
            out[variant] = {"low": min(means.values()), "high": max(means.values()),
                            "reference": means.get(suite.reference)}
    return out


def _finite(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)
