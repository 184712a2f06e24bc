"""The tuned track's two plots (``figures.KINDS`` "budget" and "sensitivity"), in the
conventions of :mod:`harness.report.figures`: payload in, plain figure dict out, percents
drawn ×100, labels escaped.

Payloads (``webapp.leaderboard.tuning.figure_payloads``):

- ``budget``: ``{"metric": spec of the validation metric, "k": int, "rows": [{"label",
  "is_reference", "budget": {"budgets", "mean", "low", "high"}}]}``: each objective's
  expected best validation score among n of its k trials, with its ±1 s.d. band.
- ``sensitivity``: ``{"metric": spec, "dimension": name, "log": bool, "rows": [{"label",
  "is_reference", "points": [[value, score, seed, trial]]}]}``: every trial's seeds, the
  validation score against the value the trial gave ``dimension``.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.report.figures import (
    GRID,
    Figure,
    _direction,
    _layout,
    _rgba,
    _scale,
    _styles,
    _unit,
    escape,
)


def budget(payload: Mapping) -> Figure:
    spec = payload.get("metric")
    f = _scale(spec)
    rows = [r for r in payload["rows"] if r.get("budget")]
    styles = _styles([{"label": r["label"], "is_reference": r.get("is_reference")}
                      for r in rows])
    traces = []
    for r in rows:
        label, curve = escape(r["label"]), r["budget"]
        color, symbol = styles[r["label"]]
        x = list(curve["budgets"])
        traces.append({"x": x + x[::-1],
                       "y": [f(v) for v in curve["high"]] + [f(v) for v in curve["low"]][::-1],
                       "type": "scatter", "mode": "lines", "fill": "toself",
                       "fillcolor": _rgba(color, 0.12), "line": {"width": 0},
                       "hoverinfo": "skip", "showlegend": False, "legendgroup": label})
        traces.append({"x": x, "y": [f(v) for v in curve["mean"]], "type": "scatter",
                       "mode": "lines+markers", "name": label, "legendgroup": label,
                       "line": {"color": color, "width": 2},
                       "marker": {"color": color, "symbol": symbol, "size": 7},
                       "hovertemplate": f"{label}: best of %{{x}} trials %{{y:.4g}}"
                                        "<extra></extra>"})
    return {"data": traces, "layout": _layout(
        height=360,
        xaxis={"title": {"text": "trials (tuning budget)"}, "dtick": 1, "gridcolor": GRID},
        yaxis={"title": {"text": f"expected best validation score{_unit(spec)}"
                                 f"{_direction(spec)}"}, "gridcolor": GRID})}


def sensitivity(payload: Mapping) -> Figure:
    spec = payload.get("metric")
    f = _scale(spec)
    name = escape(payload["dimension"])
    styles = _styles([{"label": r["label"], "is_reference": r.get("is_reference")}
                      for r in payload["rows"]])
    traces = []
    for r in payload["rows"]:
        label = escape(r["label"])
        color, symbol = styles[r["label"]]
        points = [p for p in r["points"] if p[1] is not None]
        traces.append({"x": [p[0] for p in points], "y": [f(p[1]) for p in points],
                       "text": [f"trial {p[3]}, seed {p[2]}" for p in points],
                       "type": "scatter", "mode": "markers", "name": label,
                       "marker": {"color": color, "symbol": symbol, "size": 7, "opacity": 0.7},
                       "hovertemplate": f"{label} %{{text}}: {name} = %{{x:.3g}}, "
                                        "score %{y:.4g}<extra></extra>"})
    return {"data": traces, "layout": _layout(
        height=340,
        xaxis={"title": {"text": name}, "type": "log" if payload.get("log") else "linear",
               "gridcolor": GRID},
        yaxis={"title": {"text": f"validation score{_unit(spec)}{_direction(spec)}"},
               "gridcolor": GRID})}
