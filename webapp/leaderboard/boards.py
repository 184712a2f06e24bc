"""The leaderboard's tables: per-variant tables, per-suite summaries, the ranked home table.

Which results a table uses: per suite version, the newest version of every (objective,
label) with a result, a cell that trained (``store.latest_versions``: one whose cells all
failed or were killed is on no public table), plus the suite's reference
version (``store.reference_version``). Statistics come from :mod:`harness.report.stats`
through :func:`harness.report.tables.variant_tables`; nothing here computes its own interval.

One sign convention everywhere: an *improvement* over the reference is positive when the
objective is better, whatever the metric's direction (``x − ref`` for higher-is-better
metrics, ``ref − x`` for lower-is-better ones). Normalized scores use the suite's fixed
anchors (worst → 0, best → 1), never statistics of the submitted population, so adding a
submission changes nobody else's numbers; only rank positions move.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
from django.db.models import Count

from harness.contract.suite import Suite
from harness.report import stats
from harness.report.tables import CellRow, Memo, TableRow, variant_tables, worst_variant
from harness.storage import store
from harness.storage.models import Cell, Metric, Objective, ObjectiveVersion
from webapp.leaderboard import cache
from webapp.leaderboard.comparisons import comparisons
from webapp.leaderboard.home_score import ranked_scores, scorable, score_rows
from webapp.leaderboard.lookup import (
    KINDS,
    check_kind,
    suite_meta,
    suite_of,
    suites_on,
    variant_of,
)
from webapp.leaderboard.pieces import headline_values
from webapp.leaderboard.state import SuiteState, resolve, state_of, states_of, versions_key

RANK_METHOD = ("per suite, the IQM of the objective's normalized headline over every seed of "
               "the suite's ranked variants (the suite's minimum of seeds on each); across "
               "suites, the mean of those, each suite counting once; 95% stratified bootstrap "
               "interval (about 92% at 5 seeds, bench/aggregate_coverage.py). Objectives are "
               "ranked only among those scored on the same suites; tied (=) with the first of "
               "its group when their difference is not resolved. Normalization anchors are "
               "fixed per suite version; objectives short of the seeds are provisional: "
               "listed, not ranked")


# --- public -----------------------------------------------------------------------------


def variant_table(suite: Suite | str, variant: str) -> dict:
    """One variant's table, rows sorted best first."""
    suite = suite_of(suite)
    variant_of(suite, variant)
    return variant_tables_cached(state_of(suite), [variant])[variant]


def suite_summary(suite: Suite | str) -> dict:
    """Per objective version: headline relative to the reference over the default variants.

    Row fields: ``improvement`` = mean over seeds of (mean over variants of the headline's
    improvement over the reference, positive = better), in the metric's units, its 95%
    Student-t CI over paired seeds (seeds with values for both on every covered
    variant), ``distinguishable`` (paired t-test, Holm-corrected over the page's rows),
    ``normalized`` = mean over covered variants of the anchored headline mean,
    ``by_variant`` = per-variant normalized means."""
    state = state_of(suite_of(suite))
    summary = summaries([state])[state.suite.name]
    return {k: x for k, x in summary.items() if k != "_basis"}


@dataclass
class HomeView:
    """The home table a request asks for, resolved cheaply (one tally query); the board is
    read (or built) by :meth:`payload`."""

    states: list[SuiteState]
    suite: str | None
    kind: str

    @property
    def key(self) -> str:
        return cache.key("home", ",".join(f"{s.suite.name}@{s.suite.version}"
                                          for s in self.states))

    @property
    def cells_fingerprint(self) -> str:
        """Of every shown suite's finished cells: what the cached board depends on."""
        return cache.combine(s.fingerprint for s in self.states)

    @property
    def fingerprint(self) -> str:
        """Identifies this exact table (data, code and filter)."""
        return cache.combine([self.key, self.cells_fingerprint, self.kind])

    def payload(self) -> dict:
        states = self.states
        board = cache.cached([(self.key, self.cells_fingerprint,
                               lambda: _build_home(states))])[0]
        rows = board["rows"]
        if self.kind != "all":
            rows = [r for r in rows if r["is_builtin"] == (self.kind == "builtin")]
        return {**board, "suite": self.suite, "kind": self.kind, "rows": rows}


def home_view(*, suite: str | None = None, kind: str = "all",
              track: str | None = None) -> HomeView:
    """``track="tuned"``: the board over the suites' tuned tracks (only suites with a tuned
    protocol: the score is then over those, and the page says so)."""
    check_kind(kind)
    suites = [suite_of(suite, track)] if suite else suites_on(track)
    return HomeView(states_of(suites), suite, kind)


def home_table(*, suite: str | None = None, kind: str = "all",
               track: str | None = None) -> dict:
    """Objectives × suites: each cell a :func:`suite_summary` row; cross-suite rank.

    ``score`` is the aggregate of :mod:`harness.report.aggregate` over the suites the
    objective is ranked on (``coverage``), with its interval; ``rank`` (with its interval
    and ``tied``) is among the rows of the same coverage, computed before the ``kind``
    filter, so a filtered view keeps the global ranks. The ranked table is cached as a
    whole (one tally query, one read)."""
    return home_view(suite=suite, kind=kind, track=track).payload()


def visible_rows(rows: list[dict], *, kind: str = "all", limit: int | None = None) -> list[dict]:
    """Rows a page shows: built-in / submitted / all, the best ``limit``; the reference is
    always kept, so every P(improvement) shown has its baseline on screen."""
    check_kind(kind)
    keep = [r for r in rows if kind == "all" or r["is_reference"]
            or r["is_builtin"] == (kind == "builtin")]
    if limit is not None and len(keep) > limit:
        keep = keep[:limit] + [r for r in keep[limit:] if r["is_reference"]]
    return keep


def export_tables(suite: Suite | str, variant: str | None = None,
                  track: str | None = None) -> tuple[Suite, list[dict]]:
    """An export's tables, on ``track``: one variant, or every default one with results."""
    suite = suite_of(suite, track)
    if variant is not None:
        variant_of(suite, variant)
    return suite, table_page(suite, None if variant is None else [variant])[1]


def table_page(suite: Suite, variants: list[str] | None = None,
               window: slice = slice(None)) -> tuple[list[str], list[dict]]:
    """``variants`` (default: the default variants with results) and the tables of those in
    ``window``: only these are read from the cache or built."""
    state = state_of(suite)
    variants, names = _page_names(state, variants, window)
    tables = variant_tables_cached(state, names)
    return variants, [tables[n] for n in names]


def _page_names(state: SuiteState, variants: list[str] | None,
                window: slice) -> tuple[list[str], list[str]]:
    """(the variants a page of tables lists, default: the default variants with results;
    the names in ``window``)."""
    if variants is None:
        variants = [v for v in state.suite.default_variants if v in state.per_variant]
    return variants, variants[window]


def tables_json_key(suite: Suite, names: list[str] | None = None) -> str:
    """The key of a serialized page of ``names``' tables (without: the prefix of all)."""
    return cache.key("tables-json", suite.name, suite.version,
                     *([cache.combine(names)] if names is not None else []))


def table_page_json(suite: Suite, variants: list[str] | None = None,
                    window: slice = slice(None)) -> tuple[list[str], str]:
    """:func:`table_page` with the tables already serialized (a JSON array, compact,
    NaN-free), cached as one string per page on the page's variant fingerprints: a warm
    API answer reads one row instead of decoding and encoding every row of every table."""
    state = state_of(suite)
    variants, names = _page_names(state, variants, window)
    key = tables_json_key(suite, names)
    stored = cache.read([versions_key(suite), key])
    resolve(state, stored)
    fingerprint = cache.combine(state.variant_fp(n) for n in names)

    def build() -> dict:
        tables = variant_tables_cached(state, names)
        return {"args": names, "json": json.dumps([tables[n] for n in names],
                                                  allow_nan=False, ensure_ascii=False,
                                                  separators=(",", ":"))}

    return variants, cache.cached([(key, fingerprint, build)], stored)[0]["json"]


# --- cached pieces ----------------------------------------------------------------------


def variant_tables_cached(state: SuiteState, variants: list[str]) -> dict[str, dict]:
    """Variant tables, each valid while its variant's cells and the table versions are."""
    suite = state.suite
    keys = [cache.key("variant", suite.name, suite.version, v) for v in variants]
    stored = cache.read([versions_key(suite), *keys])
    resolve(state, stored)
    items = [(k, state.variant_fp(v), (lambda v=v: _build_variant_table(state, v)))
             for k, v in zip(keys, variants, strict=True)]
    return dict(zip(variants, cache.cached(items, stored), strict=True))


def summaries(states: list[SuiteState]) -> dict[str, dict]:
    """Suite summaries (``_basis``: what each row was computed from, for the next update)."""
    keys = [cache.key("summary", s.suite.name, s.suite.version) for s in states]
    stored = cache.read(keys)
    items = [(k, s.fingerprint, (lambda s=s, k=k: _build_summary(
        s, (stored.get(k) or (None, None))[1]))) for s, k in zip(states, keys, strict=True)]
    return {s.suite.name: p for s, p in zip(states, cache.cached(items, stored), strict=True)}


# --- builders (run on a cache miss) -----------------------------------------------------


def _build_home(states: list[SuiteState]) -> dict:
    suites = [s.suite for s in states]
    found = summaries(states)
    rows: dict[tuple[str, str], dict] = {}
    for s in suites:
        for r in found[s.name]["rows"]:
            row = rows.setdefault((r["slug"], r["label"]), {
                "objective": r["label"], "slug": r["slug"], "name": r["name"],
                "is_builtin": r["is_builtin"], "cells": {}, "_scores": {}})
            row["cells"][s.name] = {k: x for k, x in r.items() if k not in (
                "by_variant", "variant_means", "ranked_seeds")}
            if scorable(r):
                row["_scores"][s.name] = ranked_scores(r)
    score_rows(list(rows.values()), referenced={
        s.name for s in suites
        if any(r["is_reference"] and scorable(r) for r in found[s.name]["rows"])})
    ordered = sorted(rows.values(), key=lambda r: (
        r["score"] is None, -len(r["coverage"]), r["coverage"], r["rank"] or 0,
        -(r["score"] or 0), r["objective"]))
    # a suite without results gets no empty column (its reference is listed all the same)
    shown = [s for s in suites if any(r["variants_covered"] for r in found[s.name]["rows"])]
    return {"rank_method": RANK_METHOD, "kinds": list(KINDS),
            "suites": [{k: found[s.name][k] for k in
                        ("suite", "suite_version", "description", "headline", "headline_label",
                         "headline_short", "headline_spec", "percent", "higher_is_better",
                         "better", "reference", "variants", "anchors", "ranked", "min_seeds")}
                       for s in shown],
            "rows": ordered}


def table_versions(suite: Suite) -> tuple[list[ObjectiveVersion], ObjectiveVersion | None]:
    versions = {v.pk: v for v in store.latest_versions(suite)}
    ref = store.reference_version(suite)
    if ref is not None:
        versions.setdefault(ref.pk, ref)
    objectives = Objective.objects.in_bulk({v.objective_id for v in versions.values()})
    for v in versions.values():
        v.objective = objectives[v.objective_id]
    return list(versions.values()), ref


def _cell_rows(suite: Suite, variants: list[str],
               versions: list[ObjectiveVersion]) -> list[CellRow]:
    """Tidy rows keyed by version id (so labels can never collide), suite metrics only."""
    cells = list(Cell.objects.filter(suite=suite.name, suite_version=suite.version,
                                     status__in=Cell.FINISHED, variant__in=variants,
                                     version__in=[v.pk for v in versions])
                 .order_by("version_id", "seed", "id")  # a fixed order: the same numbers
                 .values_list("id", "version_id", "variant", "seed", "status",
                              "environment__track"))
    metrics: dict[int, dict[str, float]] = {}
    for cell_id, name, value in Metric.objects.filter(
            cell_id__in=[c[0] for c in cells],
            name__in=[m.name for m in suite.metrics]).values_list("cell_id", "name", "value"):
        metrics.setdefault(cell_id, {})[name] = value
    return [CellRow(str(vid), variant, seed, status, metrics.get(cid, {}),
                    track if isinstance(track, str) else "")
            for cid, vid, variant, seed, status, track in cells]


def _build_variant_table(state: SuiteState, variant: str) -> dict:
    suite, versions, ref = state.suite, state.versions, state.ref
    headline = suite.headline_metric
    secondary = tuple(m.name for m in suite.metrics if m.name != headline.name)
    labels = store.version_labels(versions)
    with comparisons(suite, variant) as memo:
        rows = tables_for(suite, [variant], versions, ref, labels, memo).get(variant, [])
    return {**suite_meta(suite), "variant": variant,
            "variant_description": suite.variant(variant).description,
            "reference": labels[ref.pk] if ref else suite.reference,
            "metrics": [headline.name, *secondary], "rows": rows}


def tables_for(suite: Suite, variants: list[str], versions: list[ObjectiveVersion],
               ref: ObjectiveVersion | None, labels: dict[int, str],
               memo: Memo | None = None) -> dict[str, list[dict]]:
    """Row payloads per variant for ``versions`` (harness.report.tables.variant_tables)."""
    headline = suite.headline_metric
    secondary = tuple(m.name for m in suite.metrics if m.name != headline.name)
    rows = _cell_rows(suite, variants, versions)
    tables = variant_tables(rows, headline=headline.name,
                            higher_is_better=headline.higher_is_better,
                            reference=str(ref.pk) if ref else "", secondary=secondary,
                            min_seeds=suite.min_seeds, memo=memo)
    by_id = {v.pk: v for v in versions}
    values: dict[tuple[str, str], dict[int, float]] = {}
    for r in rows:
        x = r.metrics.get(headline.name)
        if r.status == "ok" and x is not None and math.isfinite(x):
            values.setdefault((r.variant, r.objective), {})[r.seed] = x
    tracks = {r.objective: r.track for r in rows if r.track}
    named = {t.name: t.label for t in suite.tracks}
    verified = store.verified_versions(by_id)
    return {name: [{**_row_payload(tr, by_id[int(tr.objective)], labels[int(tr.objective)],
                                   values.get((name, tr.objective), {})),
                    "track": named.get(tracks.get(tr.objective, ""), ""),
                    "verified": int(tr.objective) in verified}
                   for tr in table] for name, table in tables.items()}


def _row_payload(tr: TableRow, v: ObjectiveVersion, label: str, values: dict) -> dict:
    s, vs = tr.summary, tr.vs_reference
    return {
        "objective": label, "slug": v.objective.slug, "version_id": v.pk,
        "is_builtin": v.objective.is_builtin, "seeds": tr.seeds, "diverged": tr.diverged,
        "failed": tr.failed, "mean": s.mean, "std": s.std, "ci_low": s.ci_low,
        "ci_high": s.ci_high, "iqm": s.iqm, "secondary": dict(tr.secondary),
        "values": {int(k): float(x) for k, x in sorted(values.items())},
        # mean_diff and its CI are improvements: positive = better than the reference
        "vs_reference": None if vs is None else {
            "prob_improvement": vs.prob_improvement, "prob_ci_low": vs.prob_ci_low,
            "prob_ci_high": vs.prob_ci_high, "mean_diff": vs.mean_diff,
            "diff_ci_low": vs.diff_ci_low, "diff_ci_high": vs.diff_ci_high,
            "distinguishable": bool(vs.distinguishable), "n_pairs": vs.n_pairs,
            "p_value": vs.p_value, "p_holm": vs.p_adjusted},
        "tied_with_best": bool(tr.tied_with_best), "is_reference": bool(tr.is_reference),
        "rank_low": tr.rank_interval[0] if tr.rank_interval else None,
        "rank_high": tr.rank_interval[1] if tr.rank_interval else None,
    }


def _build_summary(state: SuiteState, previous: dict | None = None) -> dict:
    """The suite summary. With ``previous`` (the stale stored summary) it is updated, not
    recomputed: a row depends only on its own version's cells and the reference's over
    the default variants, so rows whose version fingerprint is unchanged are kept and only
    the others are read and computed; the Holm correction and the order are redone over
    all. A change of the table versions or of the reference's cells recomputes every row."""
    suite = state.suite
    defaults = suite.default_variants
    headline = suite.headline_metric
    anchors = suite.headline_anchors
    stored = cache.read([versions_key(suite)])
    resolve(state, stored)
    versions, ref = state.versions, state.ref
    basis = version_fingerprints(suite, defaults)  # taken before the cells are read
    ref_fp = basis.get(ref.pk, cache.EMPTY) if ref else cache.EMPTY
    old = (previous or {}).get("_basis") or {}
    keep: dict[int, dict] = {}
    if old.get("versions") == state.versions_fp and old.get("ref") == ref_fp:
        fps = old.get("rows", {})
        keep = {r["version_id"]: r for r in previous["rows"]
                if fps.get(str(r["version_id"])) == basis.get(r["version_id"], cache.EMPTY)}
    todo = [v for v in versions if v.pk not in keep]
    read = list(dict.fromkeys([v.pk for v in todo] + ([ref.pk] if ref else [])))
    values = headline_values(suite, read, defaults) if todo else {}
    counts: dict[int, dict[str, int]] = {}
    if todo:
        for vid, status, n in (Cell.objects.filter(
                suite=suite.name, suite_version=suite.version, status__in=Cell.FINISHED,
                variant__in=defaults, version__in=[v.pk for v in todo])
                .values_list("version_id", "status").order_by().annotate(n=Count("id"))):
            counts.setdefault(vid, {})[status] = n
    labels = store.version_labels(versions)
    ref_values = values.get(ref.pk, {}) if ref else {}
    rows = []
    for v in versions:
        if v.pk in keep:
            rows.append(keep[v.pk])
            continue
        mine = values.get(v.pk, {})
        covered = [x for x in defaults if mine.get(x)]
        means = {x: float(np.mean(list(mine[x].values()))) for x in covered}
        by_variant = {x: anchors.normalize(m) for x, m in means.items()}
        worst = worst_variant(means, headline.higher_is_better) or (None, None)
        c = counts.get(v.pk, {})
        ranked = bool(suite.ranked_variants) and all(
            len(mine.get(x, {})) >= suite.min_seeds for x in suite.ranked_variants)
        rows.append({
            "objective": labels[v.pk], "label": v.label, "name": v.objective.name,
            "slug": v.objective.slug, "version_id": v.pk, "is_builtin": v.objective.is_builtin,
            "is_reference": ref is not None and v.pk == ref.pk,
            "variants_covered": len(covered), "variants_total": len(defaults),
            "complete": len(covered) == len(defaults) and bool(defaults),
            # ranked: min_seeds seeds on each of the suite's ranked variants; the home
            # table's score is over those alone, the same set for every objective
            "ranked": ranked,
            # per seed, for the cross-suite score and its interval (keys: JSON's strings)
            "ranked_seeds": {x: {str(seed): anchors.normalize(value)
                                 for seed, value in mine[x].items() if math.isfinite(value)}
                             for x in suite.ranked_variants} if ranked else {},
            "diverged": c.get(Cell.DIVERGED, 0),
            "failed": sum(n for s, n in c.items() if s not in (Cell.OK, Cell.DIVERGED)),
            "mean": float(np.mean(list(means.values()))) if means else None,
            "normalized": float(np.mean(list(by_variant.values()))) if by_variant else None,
            "by_variant": by_variant, "variant_means": means,
            "worst_variant": worst[0], "worst": worst[1],
            **relative(mine, ref_values, covered, headline.higher_is_better,
                       is_reference=ref is not None and v.pk == ref.pk,
                       min_seeds=suite.min_seeds),
        })
    # every objective against the reference on one page: one Holm family of verdicts
    adjusted = stats.holm([math.nan if r["p_value"] is None else r["p_value"] for r in rows])
    for r, p in zip(rows, adjusted, strict=True):
        r["distinguishable"] = bool(p < 0.05)
    rows.sort(key=lambda r: (r["normalized"] is None, -(r["normalized"] or 0), r["objective"]))
    return {**suite_meta(suite), "reference": labels.get(ref.pk) if ref else None,
            "variants": defaults, "ranked": suite.ranked_variants,
            "min_seeds": suite.min_seeds, "rows": rows,
            "_basis": {"versions": state.versions_fp, "ref": ref_fp,
                       "rows": {str(v.pk): basis.get(v.pk, cache.EMPTY) for v in versions}}}


def version_fingerprints(suite: Suite, variants: list[str]) -> dict[int, str]:
    """{version id: fingerprint of its finished cells in ``variants``}, one query."""
    return {a["version_id"]: cache.fingerprint(a["n"], a["c"])
            for a in cache.tallies("version_id", suite=suite.name, suite_version=suite.version,
                                   variant__in=variants)}


def relative(mine: dict[str, dict[int, float]], ref: dict[str, dict[int, float]],
             covered: list[str], higher: bool, *, is_reference: bool,
             min_seeds: int = 3) -> dict:
    """The headline's improvement over the reference (positive = better, whatever the
    metric's direction), averaged over variants, with a Student-t CI over paired seeds
    and the paired t-test's p-value (``distinguishable`` here is that test alone; a page
    comparing many objectives Holm-corrects it). Fewer than ``min_seeds`` paired seeds:
    the value only."""
    empty = {"improvement": None, "improvement_ci_low": None, "improvement_ci_high": None,
             "improvement_seeds": 0, "improvement_variants": 0, "distinguishable": False,
             "p_value": math.nan}
    both = [x for x in covered if ref.get(x)]
    if not both:
        return empty
    if is_reference:
        return {**empty, "improvement": 0.0, "improvement_ci_low": 0.0,
                "improvement_ci_high": 0.0, "improvement_variants": len(both)}
    sign = 1.0 if higher else -1.0
    seeds = set.intersection(*(set(mine[x]) & set(ref[x]) for x in both))
    per_seed = [sign * float(np.mean([mine[x][s] - ref[x][s] for x in both]))
                for s in sorted(seeds)]
    p = math.nan
    if per_seed:
        summary = stats.summarize(per_seed, min_seeds=min_seeds)
        value, lo, hi = summary.mean, summary.ci_low, summary.ci_high
        if math.isfinite(lo):
            p = float(stats.t_test(per_seed))
    else:  # no seed has both on every variant: a point estimate without an interval
        value = sign * float(np.mean([np.mean(list(mine[x].values()))
                                      - np.mean(list(ref[x].values())) for x in both]))
        lo = hi = math.nan
    return {"improvement": value, "improvement_ci_low": lo, "improvement_ci_high": hi,
            "improvement_seeds": len(per_seed), "improvement_variants": len(both),
            "distinguishable": bool(p < 0.05), "p_value": p}
