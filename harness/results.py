"""Stored results of some objective versions on one suite, for a notebook or the CLI.

:class:`Results` reads the results database (Django ORM, set up by :mod:`harness.api`):
``tables()`` computes the per-variant tables with :func:`harness.report.tables.variant_tables`
(the statistics the CLI prints and the pages show), ``to_pandas()`` gives one row per
cell and metric, ``summary()`` one row per variant and objective, and ``figure()`` the
page's plotly figure for these objectives, built from the payload the page draws by
:mod:`harness.report.figures`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from harness.contract.suite import Suite
from harness.report.tables import AcrossRow, TableRow

if TYPE_CHECKING:
    import pandas
    import plotly.graph_objects

TIDY_COLUMNS = ("objective", "version", "suite", "suite_version", "variant", "seed",
                "metric", "value", "status")
FIGURES = ("strip", "family", "heatmap", "curves", "reliability", "scatter")


@dataclass(frozen=True)
class Tables:
    """Per-variant tables (one per variant and track: the keys of ``rows``, in ``order``)
    with the metric columns each shows beside the headline, and the across-variants rows
    (per objective: mean of its variant means and its worst variant) when several
    variants are drawn."""

    order: list[str]
    rows: dict[str, list[TableRow]]
    columns: dict[str, tuple[str, ...]]
    drawn: list[str]
    across: list[AcrossRow] | None = None
    left_out: list[str] | None = None


class Results:
    """Results of ``versions`` (stored ``ObjectiveVersion`` rows) on ``suite``, on
    ``variants`` (default: every variant with results); the suite's reference is in every
    table. ``factorial``: the cells of a factorial run (:meth:`variance`)."""

    def __init__(self, suite: Suite, versions: Iterable[Any],
                 variants: list[str] | None = None, *, factorial: bool = False):
        self.suite = suite
        self.versions = list(versions)
        self.variants = list(variants) if variants else None
        self.factorial = factorial
        # a sequential run's design and each pair's looks (harness/sequential_run.py)
        self.sequential: dict | None = None

    def __repr__(self) -> str:
        names = ", ".join(v.label for v in self.versions)
        return f"<Results {self.suite.name} v{self.suite.version}: {names}>"

    # --- tables ---------------------------------------------------------------------

    @cached_property
    def _reference(self):
        from harness.storage import store

        return store.reference_version(self.suite)

    def _chosen(self) -> list[Any]:
        chosen = {v.id: v for v in self.versions}
        if self._reference is not None:
            chosen.setdefault(self._reference.id, self._reference)
        return list(chosen.values())

    def tables(self) -> Tables:
        """The tables the CLI prints: :func:`harness.report.tables.variant_tables` over these
        versions and the reference, per variant (and per track, where the suite has them)."""
        from harness.report.tables import across_variants, variant_tables
        from harness.storage import store

        suite, head = self.suite, self.suite.headline_metric
        rows = store.cell_rows(suite, self.variants, self._chosen())
        tracks = suite.tracks or (None,)
        found, shown_columns = [], []
        for track in tracks:  # a table per variant and track, the reference in each
            shown = track.columns if track and track.columns else suite.table_columns[:2]
            # every declared metric's mean is computed (--json and summary() carry them);
            # the terminal shows ``shown``
            every = tuple(dict.fromkeys([*shown, *(m.name for m in suite.metrics
                                                   if m.name != head.name)]))
            part = rows if track is None else [
                r for r in rows if r.track == track.name or r.objective == suite.reference]
            found.append(variant_tables(part, headline=head.name,
                                        higher_is_better=head.higher_is_better,
                                        reference=suite.reference, secondary=every,
                                        min_seeds=suite.min_seeds))
            shown_columns.append(shown)
        tables, order, columns, drawn = {}, [], {}, []
        for v in self.variants or [v.name for v in suite.variants]:
            for track, table, secondary in zip(tracks, found, shown_columns, strict=True):
                if v in table and (track is None or any(not r.is_reference for r in table[v])):
                    key = v if track is None else f"{v} · {track.label}"
                    tables[key], columns[key] = table[v], secondary
                    order.append(key)
                    drawn.append(v)
        drawn = list(dict.fromkeys(drawn))
        if len(drawn) < 2:
            return Tables(order, tables, columns, drawn)
        across, left_out = across_variants(rows, drawn, headline=head.name,
                                           higher_is_better=head.higher_is_better,
                                           reference=suite.reference)
        return Tables(order, tables, columns, drawn, across, left_out)

    def to_json(self) -> dict:
        """The tables as ``harness run --json`` prints them (values in stored units)."""
        t = self.tables()
        suite = self.suite
        out = {"suite": suite.name, "suite_version": suite.version, "track": suite.track,
               "headline": suite.headline, "headline_metric": suite.headline_metric.to_json(),
               "metrics": {m.name: m.to_json() for m in suite.metrics},
               "reference": suite.reference,
               "variants": {key: [_row_json(r) for r in t.rows[key]] for key in t.order},
               # each row's "secondary" has every declared metric; the table shows these
               "displayed": {key: list(t.columns[key]) for key in t.order}}
        if suite.track != "defaults":
            out["tuning"] = self.tuning()
        if self.sequential is not None:
            out["sequential"] = self.sequential
        if t.across is not None:
            out["across_variants"] = {
                "variants": t.drawn, "left_out": t.left_out,
                "rows": [{"objective": r.objective, "mean": r.mean, "worst": r.worst,
                          "worst_variant": r.worst_variant, "means": r.means}
                         for r in t.across]}
        return out

    def tuning(self) -> dict[str, list[dict]]:
        """On a tuned track (``run(..., tuned=True)``): per variant and objective, the trial
        chosen, every trial's validation score, the expected best at each budget and the
        tuning gain over the defaults (:func:`webapp.leaderboard.tuning.tuning_report`); {}
        on the defaults' track."""
        if self.suite.track == "defaults":
            return {}
        from webapp.leaderboard.tuning import tuning_report

        return tuning_report(self.suite, self._chosen(), self.variants or [
            v.name for v in self.suite.default_variants])

    def summary(self) -> pandas.DataFrame:
        """One row per (table, objective), best first within each table: seeds, the
        headline's mean, s.d., 95% CI and IQM, the paired comparison with the reference,
        ★ (tied with the best) and the secondary metrics' means, in stored units."""
        import pandas as pd

        records = []
        for key, rows in self.to_json()["variants"].items():
            for r in rows:
                secondary = r.pop("secondary")
                records.append({"variant": key, **r, **secondary})
        return pd.DataFrame.from_records(records)

    # --- cells ----------------------------------------------------------------------

    def to_pandas(self) -> pandas.DataFrame:
        """Tidy: one row per (cell, metric) with the columns of :data:`TIDY_COLUMNS`; a cell
        without metrics (failed, killed) is one row with no metric, so its status shows."""
        import pandas as pd

        from harness.storage import store
        from harness.storage.models import Cell

        cells = Cell.objects.filter(suite=self.suite.name, suite_version=self.suite.version,
                                    version__in=self._chosen())
        if self.variants:
            cells = cells.filter(variant__in=self.variants)
        cells = list(cells.values_list("id", "version__objective__name", "version__label",
                                       "variant", "seed", "status").order_by(
            "version__label", "variant", "seed"))
        metrics = store.metrics_of(c[0] for c in cells)
        records = []
        for cell_id, name, label, variant, seed, status in cells:  # the name, as everywhere
            base = (name, label, self.suite.name, self.suite.version, variant, seed)
            stored = metrics.get(cell_id, {})
            for name, value in stored.items() if stored else [(None, float("nan"))]:
                records.append((*base, name, value, status))
        return pd.DataFrame.from_records(records, columns=list(TIDY_COLUMNS))

    def _repr_html_(self) -> str:  # Jupyter shows the summary
        import html

        summary = self.summary()
        table = summary.to_html(index=False) if len(summary) else "<p>no finished cells</p>"
        return f"<p>{html.escape(repr(self))}</p>" + table

    # --- the seed-variance decomposition -------------------------------------------------

    def variance(self) -> list[tuple[str, str, int, Any]]:
        """Per objective and variant of a factorial run: (label, variant, cells, the
        headline's :class:`harness.report.variance.Decomposition` by seed stream, or None until
        the grid is complete)."""
        from harness.contract.seeding import FACTORS
        from harness.report.variance import complete_grid, decompose
        from harness.storage import store

        head = self.suite.headline_metric
        report = []
        for variant in self.variants or self.suite.default_variants:
            scores = store.factorial_scores(self.suite, variant, head.name,
                                              versions=self.versions)
            for version in self.versions:
                grid = complete_grid(scores.get(version, {}), self.suite.seed_streams)
                d = None if grid is None else decompose(grid, FACTORS)
                report.append((version.label, variant, len(scores.get(version, {})), d))
        return report

    def variance_json(self) -> dict:
        return {"suite": self.suite.name, "version": self.suite.version,
                "metric": self.suite.headline, "rows": [
                    {"objective": label, "variant": variant, "cells": n,
                     "decomposition": None if d is None else _decomposition_json(d)}
                    for label, variant, n, d in self.variance()]}

    # --- figures --------------------------------------------------------------------

    def figure(self, kind: str = "strip", *, variant: str | None = None,
               objective: str | None = None, index: int = 0) -> plotly.graph_objects.Figure:
        """The page's plot of these objectives (and the reference) as a plotly figure.

        ``kind``: "strip" (per-seed headline values of one variant), "family" (the
        headline across a family of variants, with CI bands), "heatmap" (objectives ×
        the suite's heatmap metrics), "curves" (one objective's training curves with
        bands), "reliability" (its reliability diagram, where the suite declares one),
        "scatter" (its per-seed metric pairs, the suite's ``index``-th declared scatter).
        ``variant``: default the first with results; ``objective``: a label of these
        versions, default the first that is not the reference."""
        from harness.report import figures
        return figures.figure(kind, self.payload(kind, variant=variant, objective=objective,
                                                 index=index))

    def payload(self, kind: str, *, variant: str | None = None,
                objective: str | None = None, index: int = 0) -> dict:
        """The data :meth:`figure` draws: the payload the page's plot of ``kind`` reads."""
        from webapp.leaderboard import boards, plots

        if kind not in FIGURES:
            raise ValueError(f"no figure {kind!r}: one of {', '.join(FIGURES)}")
        suite = self.suite
        variant = variant or self._first_variant()
        mine = {v.id for v in self._chosen()}
        if kind in ("strip", "family", "heatmap"):
            table = boards.variant_table(suite, variant)
            rows = [r for r in table["rows"] if r["version_id"] in mine]
            if kind == "strip":
                return plots.strip_plot(table, rows)
            if kind == "heatmap":
                drawn = suite.heatmap.variant if suite.heatmap and suite.heatmap.variant \
                    else variant
                payload = plots.heatmap(suite, rows, boards.variant_table(suite, drawn))
                if payload is None:
                    raise ValueError(f"the {suite.name} suite declares no heatmap, or these "
                                     f"objectives have no values for it")
                return payload
            series = plots.family_series(suite)
            if series["axis"] is None:
                raise ValueError(f"the {suite.name} suite declares no variant axis: no "
                                 f"family plot")
            return plots.family_plot(series, [r["objective"] for r in rows],
                                     metric=table["headline_label"],
                                     spec=table["headline_spec"])
        version = self._version(objective)
        if kind == "scatter":
            found = plots.scatter(suite, version.objective, [variant])
            if index >= len(found):
                raise ValueError(f"the {suite.name} suite declares {len(suite.scatters)} "
                                 f"scatter plots with values here; no index {index}")
            return found[index]
        curves = plots.build_curves(version.objective, suite, variant)
        if kind == "curves":
            return curves
        payload = plots.reliability(suite, curves)
        if payload is None:
            raise ValueError(f"the {suite.name} suite declares no reliability diagram, or "
                             f"{version.label} stored no bins on {variant}")
        return payload

    def _first_variant(self) -> str:
        """The first variant (in the requested or the suite's order) with finished cells."""
        from harness.storage.models import Cell

        ran = set(Cell.objects.filter(
            suite=self.suite.name, suite_version=self.suite.version,
            version__in=self._chosen(), status__in=Cell.FINISHED,
        ).values_list("variant", flat=True).distinct())
        order = [v for v in self.variants or [v.name for v in self.suite.variants]
                 if v in ran]
        if not order:
            raise ValueError(f"no finished cells of {self!r}")
        return order[0]

    def _version(self, label: str | None):
        versions = [v for v in self.versions if label in (None, v.label, v.objective.name)]
        if label is None:
            versions = [v for v in versions if v.objective.slug != self.suite.reference] \
                or versions
        if not versions:
            raise ValueError(f"no objective {label!r} here: "
                             f"{', '.join(v.label for v in self.versions)}")
        return versions[0]


def _row_json(r: TableRow) -> dict:
    c = r.vs_reference
    return {"objective": r.objective, "seeds": r.seeds, "diverged": r.diverged,
            "failed": r.failed, **{k: getattr(r.summary, k) for k in
                                   ("mean", "std", "ci_low", "ci_high", "iqm")},
            "secondary": r.secondary, "tied_with_best": r.tied_with_best,
            "p_improvement": c.prob_improvement if c else None,
            "improvement": c.mean_diff if c else None,
            "improvement_ci_low": c.diff_ci_low if c else None,
            "improvement_ci_high": c.diff_ci_high if c else None,
            "distinguishable": c.distinguishable if c else None}


def _decomposition_json(d: Any) -> dict:
    return {"levels": dict(zip(d.factors, d.levels, strict=True)), "mean": d.mean,
            "sd": d.total_sd, "sources": [
                {"source": s.name, "variance": s.variance, "share": s.share,
                 "share_low": s.share_low, "share_high": s.share_high} for s in d.sources]}
