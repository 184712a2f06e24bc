"""The suite page's payload: a variant's table reduced to what is shown, its plots, and
every objective across the default variants."""

from __future__ import annotations

from harness.suite import Suite
from webapp.leaderboard import cache, plots, ranking
from webapp.leaderboard.lookup import check_kind, suite_meta, suite_of, variant_of
from webapp.leaderboard.state import SuiteState, state_of
from webapp.leaderboard.tables import summaries, variant_tables_cached, visible_rows


def suite_page(suite: Suite | str, variant: str | None = None, *, kind: str = "all",
               limit: int | None = None) -> dict:
    """What the suite page shows, from one fingerprint query and one cache read: suite
    metadata, the variants with their cell counts, the chosen variant (default: the first
    default variant with results), its table reduced to :func:`visible_rows` (``rows``;
    ``total_rows`` counts all), the strip-plot, family-plot and heatmap data of those rows,
    and ``across``: the suite summary's rows over the default variants (:func:`across`).

    The reduced view is cached per (variant, kind, limit) on the suite's fingerprint; on a
    miss it is cut from the cached full tables, summary and family series.
    """
    suite = suite_of(suite)
    check_kind(kind)
    state = state_of(suite)
    suite_fp, per_variant = state.fingerprint, state.per_variant
    variants = [{"name": v.name, "description": v.description, "default": v.default,
                 "cells": int(per_variant.get(v.name, cache.EMPTY).split(":")[0])}
                for v in suite.variants]
    if variant is None:
        with_results = [v["name"] for v in variants if v["cells"]]
        defaults = [v for v in suite.default_variants if v in with_results]
        variant = (defaults or with_results or [suite.variants[0].name])[0]
    variant_of(suite, variant)
    key = cache.key("suite-page", suite.name, suite.version, variant, kind, limit)
    view = cache.cached([(key, suite_fp, lambda: _build_view(state, variant, kind, limit))])[0]
    return {"suite": suite_meta(suite), "variants": variants, "variant": variant, **view}


def across(summary: dict, *, kind: str = "all", limit: int | None = None) -> dict:
    """The summary's rows best first by their mean over the covered default variants (in the
    headline's direction; incomplete rows after complete ones, rows without any last),
    reduced to :func:`visible_rows`; each with ``cells``, its per-variant means in the
    suite's order, the worst one marked."""
    sign = 1 if summary["higher_is_better"] else -1
    ordered = sorted(summary["rows"], key=lambda r: (
        r["mean"] is None, not r["complete"], -sign * (r["mean"] or 0), r["objective"]))
    rows = []
    for r in visible_rows(ordered, kind=kind, limit=limit):
        means = r.get("variant_means") or {}
        rows.append({k: r[k] for k in (
            "objective", "slug", "version_id", "is_builtin", "is_reference", "mean", "worst",
            "worst_variant", "variants_covered", "variants_total", "complete")} | {
            "cells": [{"variant": v, "mean": means.get(v), "worst": v == r["worst_variant"]}
                      for v in summary["variants"]]})
    return {"variants": summary["variants"], "rows": rows, "total_rows": len(ordered)}


def _build_view(state: SuiteState, variant: str, kind: str, limit: int | None) -> dict:
    suite = state.suite
    drawn = suite.heatmap.variant if suite.heatmap and suite.heatmap.variant else variant
    tables = variant_tables_cached(state, list(dict.fromkeys([variant, drawn])))
    table = tables[variant]
    rows = visible_rows(table["rows"], kind=kind, limit=limit)
    summary = summaries([state])[suite.name]
    # the family plot chooses its lines across the family, from every objective of the kind
    everyone = visible_rows(summary["rows"], kind=kind)
    series = plots.build_series(state, everyone)
    ranked = {**summary, "rows": everyone}
    return {"table": {**table, "rows": rows}, "total_rows": len(table["rows"]),
            "axis": series["axis"], "strip": plots.strip_plot(table, rows),
            "family": plots.family_plot(series, [r["objective"] for r in everyone],
                                        metric=table["headline_label"],
                                        spec=table["headline_spec"]),
            "heatmap": plots.heatmap(suite, rows, tables[drawn]),
            "profiles": ranking.performance_profiles(ranked),
            "cd": ranking.critical_difference(ranked),
            "across": across(summary, kind=kind, limit=limit)}
