"""Suites, variants and filters as the pages name them; unknown ones are :class:`NotFound`."""

from __future__ import annotations

import math

import numpy as np

from harness.contract.registry import all_suites, get_suite, suite_names
from harness.contract.suite import Suite, Variant

KINDS = ("all", "builtin", "submitted")


class NotFound(KeyError):
    """An unknown suite, variant or objective (pages answer 404)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


def suite_of(suite: Suite | str, track: str | None = None) -> Suite:
    """The suite, on the default track or (``track="tuned"``) its tuned track."""
    if not isinstance(suite, Suite):
        try:
            suite = get_suite(suite)
        except KeyError:
            raise NotFound(f"no suite {suite!r} (suites: {', '.join(suite_names())})") from None
    if track in (None, "", "defaults"):
        return suite
    if track != "tuned":
        raise NotFound(f"no track {track!r} (tracks: defaults, tuned)")
    if suite.tuning is None:
        raise NotFound(f"the {suite.name} suite has no tuned track (docs/tuning.md)")
    return suite.tuned()


def suites_on(track: str | None = None) -> list[Suite]:
    """Every suite on the default track, or (``track="tuned"``) the tuned track of each
    suite that has one; an unknown track is :class:`NotFound`."""
    if track in (None, "", "defaults"):
        return all_suites()
    if track != "tuned":
        raise NotFound(f"no track {track!r} (tracks: defaults, tuned)")
    return [suite_of(s, track) for s in all_suites() if s.tuning is not None]


def variant_of(suite: Suite, name: str) -> Variant:
    try:
        return suite.variant(name)
    except KeyError:
        raise NotFound(f"suite {suite.name!r} has no variant {name!r}") from None


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise NotFound(f"unknown filter {kind!r} (one of {', '.join(KINDS)})")


def suite_meta(suite: Suite) -> dict:
    """What every page needs to show a suite's numbers: its metrics with their direction,
    unit and format, its curves and plots, as declared by the suite."""
    headline = suite.headline_metric
    anchors = suite.headline_anchors
    return {"suite": suite.name, "suite_version": suite.version,
            "description": suite.description, "headline": headline.name,
            "headline_label": headline.label, "headline_short": headline.header,
            "higher_is_better": headline.higher_is_better, "better": headline.better,
            "percent": headline.percent, "headline_spec": headline.to_json(),
            "anchors": [anchors.worst, anchors.best],
            "metric_specs": [m.to_json() for m in suite.metrics],
            # The columns tables show beside the headline: with tracks, theirs (a suite
            # with many metrics would be too wide to read); otherwise every metric.
            "table_specs": [m.to_json() for m in _table_metrics(suite)],
            "tracks": {t.name: t.label for t in suite.tracks},
            # the protocol these numbers follow: "defaults" or "tuned at k=K" (docs/tuning.md)
            "track": suite.track, "tunable": suite.tuning is not None,
            "curve_specs": [c.to_json() for c in suite.curves]}


def with_values(specs: list[dict], rows: list[dict]) -> list[dict]:
    """The column specs (``table_specs``) some row has a value in: a scenario's own metrics,
    e.g. the errors per severity of a gradual stream, are blank elsewhere."""
    return [m for m in specs
            if any((r.get("secondary") or {}).get(m["name"]) is not None for r in rows)]


def _table_metrics(suite: Suite) -> list:
    return [suite.metric(n) for n in suite.table_columns]


def rounded(a: np.ndarray) -> list[float | None]:
    return [float(f"{x:.6g}") if math.isfinite(x) else None for x in np.asarray(a, float)]
