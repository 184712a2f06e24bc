"""The suite page's payload: a variant's table reduced to what is shown, its plots, and
every objective across the default variants."""

from __future__ import annotations

from dataclasses import dataclass

from harness.contract.suite import Suite
from webapp.leaderboard import cache, plots, ranking
from webapp.leaderboard.boards import summaries, variant_tables_cached, visible_rows
from webapp.leaderboard.crosssuite import resolvable, summary_intervals, table_intervals
from webapp.leaderboard.lookup import check_kind, suite_meta, suite_of, variant_of
from webapp.leaderboard.state import SuiteState, state_of


@dataclass
class SuiteView:
    """Which suite-page view a request asks for, resolved cheaply (one tally query): the
    payload itself is read (or built) by :meth:`payload`, so a caller holding something
    rendered from it can check ``key`` and ``fingerprint`` first."""

    state: SuiteState
    variant: str
    kind: str
    limit: int | None
    variants: list[dict]

    @property
    def key(self) -> str:
        s = self.state.suite
        return cache.key("suite-page", s.name, s.version, self.variant, self.kind, self.limit)

    @property
    def fingerprint(self) -> str:
        return self.state.fingerprint

    def payload(self) -> dict:
        view = cache.cached([(self.key, self.fingerprint, lambda: _build_view(
            self.state, self.variant, self.kind, self.limit))])[0]
        return {"suite": suite_meta(self.state.suite), "variants": self.variants,
                "variant": self.variant, **view}


def suite_view(suite: Suite | str, variant: str | None = None, *, kind: str = "all",
               limit: int | None = None, track: str | None = None) -> SuiteView:
    """The view :func:`suite_page` would return, not yet read: the chosen variant (default:
    the first default variant with results) and the variants with their cell counts;
    ``track="tuned"``: the suite's tuned track (``Suite.tuned``)."""
    suite = suite_of(suite, track)
    check_kind(kind)
    state = state_of(suite)
    variants = [{"name": v.name, "description": v.description, "default": v.default,
                 "cells": int(state.per_variant.get(v.name, cache.EMPTY).split(":")[0])}
                for v in suite.variants]
    if variant is None:
        with_results = [v["name"] for v in variants if v["cells"]]
        defaults = [v for v in suite.default_variants if v in with_results]
        variant = (defaults or with_results or [suite.variants[0].name])[0]
    variant_of(suite, variant)
    return SuiteView(state, variant, kind, limit, variants)


def suite_page(suite: Suite | str, variant: str | None = None, *, kind: str = "all",
               limit: int | None = None) -> dict:
    """What the suite page shows, from one tally query and one cache read: suite
    metadata, the variants with their cell counts, the chosen variant (default: the first
    default variant with results), its table reduced to :func:`visible_rows` (``rows``;
    ``total_rows`` counts all), the strip-plot, family-plot and heatmap data of those rows,
    and ``across``: the suite summary's rows over the default variants (:func:`across`).

    The reduced view is cached per (variant, kind, limit) on the suite's fingerprint; on a
    miss it is cut from the cached full tables, summary and family series.
    """
    return suite_view(suite, variant, kind=kind, limit=limit).payload()


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
            "across": across(summary, kind=kind, limit=limit),
            # what the table's verdicts can resolve: over all its rows, as Holm's family is
            "resolvable": resolvable(table_intervals(table["rows"])),
            "summary_resolvable": resolvable(summary_intervals(summary["rows"]))}
