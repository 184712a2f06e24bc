"""Where a variant's seed variance comes from: the factorial runs stored for it.

Factorial cells (``harness run --factorial``) are few (N³ per objective and variant) and
live in their own table, so this reads them directly rather than through the table
cache; the decomposition is :mod:`harness.report.variance`'s.
"""

from __future__ import annotations

from django.db.models import Count

from harness.contract.seeding import FACTORS
from harness.contract.suite import Suite
from harness.report.variance import INTERACTIONS, complete_grid, decompose
from harness.storage import store
from harness.storage.models import FactorialCell, Objective
from webapp.leaderboard.lookup import suite_of, variant_of


def variance_sources(suite: Suite | str, variant: str) -> dict | None:
    """Per public objective version with factorial cells on ``variant``: the headline's
    mean, its standard deviation between plain seeds, and each seed stream's share of the
    variance with its 95% interval (``None`` rows: the grid is incomplete). ``elsewhere``:
    other variants with factorial runs. None when the suite has no seed streams."""
    suite = suite_of(suite)
    variant_of(suite, variant)
    if not suite.seed_streams:
        return None
    head = suite.headline_metric
    sources = [{"name": n, "label": label} for n, label in suite.seed_streams.items()]
    sources.append({"name": INTERACTIONS,
                    "label": "interactions of the streams, and the rest"})
    rows = []
    scores = store.factorial_scores(suite, variant, head.name, public=True)
    for version, values in sorted(scores.items(), key=lambda kv: kv[0].label):
        grid = complete_grid(values, suite.seed_streams)
        row = {"objective": version.label, "slug": version.objective.slug,
               "cells": len(values), "decomposition": None}
        if grid is not None:
            d = decompose(grid, FACTORS)
            row["decomposition"] = {
                "grid": "×".join(map(str, d.levels)), "mean": head.format(d.mean),
                "sd": head.format_delta(d.total_sd).lstrip("+±"),
                "sources": [_source(d.source(s["name"])) for s in sources]}
        rows.append(row)
    elsewhere = (FactorialCell.objects.filter(
        suite=suite.name, suite_version=suite.version,
        version__objective__visibility=Objective.PUBLIC).exclude(variant=variant)
        .values("variant").order_by("variant").annotate(n=Count("id")))
    return {"variant": variant, "metric": head.label, "percent": head.percent,
            "sources": sources, "rows": rows, "elsewhere": [e["variant"] for e in elsewhere],
            "plot": _plot(sources, rows)}


def _source(s) -> dict:
    def pct(x: float) -> str:
        return f"{100 * x:.0f}"

    shown = s.share is not None
    return {"name": s.name, "share": s.share, "low": s.share_low, "high": s.share_high,
            "text": f"{pct(s.share)}%" if shown else "–",
            "interval": f"[{pct(s.share_low)}, {pct(s.share_high)}]" if shown else ""}


def _plot(sources: list[dict], rows: list[dict]) -> dict:
    """Grouped bars: per objective with a full grid, each source's share and interval."""
    done = [r for r in rows if r["decomposition"]]
    return {"objectives": [r["objective"] for r in done],
            "sources": [{**s, "share": [r["decomposition"]["sources"][i]["share"] for r in done],
                         "low": [r["decomposition"]["sources"][i]["low"] for r in done],
                         "high": [r["decomposition"]["sources"][i]["high"] for r in done]}
                        for i, s in enumerate(sources)]}
