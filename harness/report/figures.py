"""Over 500 lines on purpose: every plot's figure in one file, which the page cache hashes.

The leaderboard's plotly figures, one function per plot kind, for the web pages and
for notebooks alike.

Each function takes the plot's payload (the dict ``webapp.leaderboard`` builds for a page;
its shape is in the function's docstring) and returns a plain figure dict
``{"data": [trace, ...], "layout": {...}}`` of lists, dicts, strings and numbers: the pages
write it as JSON (the template filters ``figure`` and ``compact_json_script``) and the
browser only calls ``Plotly.newPlot`` on it (``webapp/static/webapp/plots.js``); a notebook
gets a ``plotly.graph_objects.Figure`` from :func:`figure`. Nothing here validates through
plotly (80 ms for a suite page's family plot), so a page pays only for building the dicts
(about 1 ms). Style shared by all of a figure's traces sits once in its layout's template.

Units: every payload value is in its metric's stored unit with the metric's spec
(``MetricSpec.to_json()``: ``unit``, ``decimals``, ``better``); percents are drawn ×100, as
the tables show them (:func:`harness.contract.suite.format_value`), and axis titles say "(%)", or
"(pp)" for a difference. Labels (objective names are user input) are escaped like text
before they reach plotly, which reads ``<b>``, ``<a href>`` and entities in names, titles
and hover text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

Figure = dict[str, Any]

COLORS = ("#2357a6", "#d9730d", "#2e8540", "#b5302a", "#7a4fb0", "#8c564b", "#c2418f",
          "#3b9ab2", "#a8a116", "#4d4d4d")
# A marker per label as well as a colour: no two of the first 40 objectives look alike, and
# none is told from another by colour alone (10 colours and 8 shapes: their cycles meet at 40)
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "triangle-down", "cross", "star")
REF = "#6b7785"  # the reference objective
INK = "#1d232a"
GRID = "#eef1f4"
FONT = "system-ui, -apple-system, 'Segoe UI', sans-serif"
PROFILE_SHOWN = 8  # profile lines drawn at first (the reference too); the rest in the legend


# --- shared pieces ------------------------------------------------------------------------


def escape(text: Any) -> str:
    """``text`` as plotly shows it literally: ``&``, ``<`` and ``>`` as entities."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _layout(**extra: Any) -> dict:
    """The pages' common layout, with ``extra`` keys replacing its own."""
    return {"margin": {"l": 64, "r": 16, "t": 28, "b": 48}, "hovermode": "closest",
            "font": {"family": FONT, "size": 12, "color": INK},
            "paper_bgcolor": "#fff", "plot_bgcolor": "#fff",
            "legend": {"orientation": "v", "x": 1.01, "y": 1, "font": {"size": 11}}, **extra}


def _percent(spec: Mapping | None) -> bool:
    return spec is not None and spec.get("unit") == "percent"


def _percent_of(v: float | None) -> float | None:
    """A fraction in percent, without the float noise of ×100 (81.0, not
    81.00000000000001: 15 significant digits, all a double holds)."""
    return None if v is None else float(f"{100 * v:.15g}")


def _scale(spec: Mapping | None) -> Callable[[float | None], float | None]:
    """Stored unit → drawn unit: ×100 for a percent (``None`` stays ``None``)."""
    return _percent_of if _percent(spec) else lambda v: v


def _significant(v: float | None, digits: int) -> float | None:
    return None if v is None else float(f"{v:.{digits}g}")


def _unit(spec: Mapping | None, delta: bool = False) -> str:
    """`` (%)`` for a percent, `` (pp)`` for a percent difference, else nothing."""
    if not _percent(spec):
        return ""
    return " (pp)" if delta else " (%)"


def _direction(spec: Mapping | None) -> str:
    better = spec.get("better") if spec is not None else None
    return f" — {better} is better" if better and better != "neither" else ""


def _hover_format(spec: Mapping | None) -> str:
    """A d3 format for hover text with the metric's decimals, as the tables print it."""
    if spec is None:
        return ":.4g"
    decimals = int(spec.get("decimals", 3))
    if spec.get("unit") == "pvalue":
        return f":.{max(decimals - 1, 1)}e"
    return f":.{decimals}f"


def _rgba(color: str, alpha: float) -> str:
    n = int(color[1:], 16)
    return f"rgba({n >> 16},{(n >> 8) & 255},{n & 255},{alpha})"


def _colors(entries: Sequence[Mapping]) -> dict[str, str]:
    """A colour per label in order of first appearance; the reference is grey."""
    return {label: style[0] for label, style in _styles(entries).items()}


def _styles(entries: Sequence[Mapping]) -> dict[str, tuple[str, str]]:
    """(colour, marker shape) per label in order of first appearance; the reference's is
    grey and open."""
    out: dict[str, tuple[str, str]] = {}
    n = 0
    for entry in entries:
        label = entry["label"]
        if label in out:
            continue
        if entry.get("is_reference"):
            out[label] = (REF, "circle-open")
        else:
            out[label] = (COLORS[n % len(COLORS)], SYMBOLS[n % len(SYMBOLS)])
            n += 1
    return out


def _at(values: Sequence, i: int) -> Any:
    return values[i] if i < len(values) else None


def _band(x: Sequence, low: Sequence, high: Sequence, color: str, axes: dict,
          group: str) -> dict:
    """A CI band as one closed polygon per run of consecutive points that have one: along
    the high edge, back along the low edge; a point without a band (a variant not run)
    separates two polygons (a ``None`` ends a ``toself`` shape)."""
    xs: list = []
    ys: list = []
    i = 0
    while i < len(x):
        if _at(low, i) is None or _at(high, i) is None:
            i += 1
            continue
        j = i
        while j < len(x) and _at(low, j) is not None and _at(high, j) is not None:
            j += 1
        if xs:
            xs.append(None)
            ys.append(None)
        xs += list(x[i:j]) + list(x[i:j])[::-1]
        ys += list(high[i:j]) + list(low[i:j])[::-1]
        i = j
    return {"x": xs, "y": ys, "type": "scatter", "mode": "lines", "fill": "toself",
            "line": {"width": 0}, "fillcolor": _rgba(color, 0.14), "hoverinfo": "skip",
            "showlegend": False, "legendgroup": escape(group), **axes}


def _bridges(x: Sequence, y: Sequence, color: str, axes: dict, group: str) -> dict | None:
    """A dotted segment across each stretch of variants a line was not run on, from the
    last point before it to the first after: the line reads as one objective without
    drawing a measurement where there is none. None where nothing is missing between two
    points."""
    known = [(i, a, b) for i, (a, b) in enumerate(zip(x, y, strict=True)) if b is not None]
    xs: list = []
    ys: list = []
    for (i, x0, y0), (j, x1, y1) in zip(known, known[1:], strict=False):
        if j - i > 1:  # a variant between them not run
            xs += [x0, x1, None]
            ys += [y0, y1, None]
    if not xs:
        return None
    return {"x": xs[:-1], "y": ys[:-1], "type": "scatter", "mode": "lines",
            "line": {"color": color, "dash": "dot", "width": 1.5}, "hoverinfo": "skip",
            "showlegend": False, "legendgroup": escape(group), **axes}


def _axes(k: int) -> dict:
    """A trace's axis references in the k-th panel (0-based) of a grid: none in the first
    (plotly's default ``x``, ``y``), else ``{"xaxis": "x2", "yaxis": "y2"}``, …"""
    return {} if k == 0 else {"xaxis": f"x{k + 1}", "yaxis": f"y{k + 1}"}


def _axis_key(prefix: str, k: int) -> str:
    """Layout key of the k-th panel's axis: ``xaxis``, ``xaxis2``, …"""
    return f"{prefix}axis" if k == 0 else f"{prefix}axis{k + 1}"


def _line(color: str, width: float | None = None, reference: bool = False) -> dict:
    """A trace's line: dashed for the reference (solid is plotly's default)."""
    return {"color": color, **({"width": width} if width is not None else {}),
            **({"dash": "dash"} if reference else {})}


def _template(**traces: dict) -> dict:
    """A layout template giving every trace of a type the same defaults (``scatter={...}``),
    so that style shared by all of a figure's traces is written once, not per trace."""
    return {"data": {kind: [defaults] for kind, defaults in traces.items()}}


def _seed_keys(seeds: Mapping) -> list:
    """Seed keys in numeric order (JSON makes them strings; "10" comes after "9")."""
    return sorted(seeds, key=lambda s: (not str(s).isdigit(), int(s) if str(s).isdigit()
                                        else 0))


def _message(text: str) -> Figure:
    """An empty figure that says why nothing is drawn."""
    return {"data": [], "layout": _layout(
        height=120, xaxis={"visible": False}, yaxis={"visible": False},
        annotations=[{"text": escape(text), "showarrow": False, "xref": "paper",
                      "yref": "paper", "x": 0.5, "y": 0.5, "font": {"size": 13}}])}


# --- one function per kind -----------------------------------------------------------------


def strip(payload: Mapping) -> Figure:
    """A box per objective with one dot per seed (the suite page's seed variance).

    ``payload``: ``{"metric": label, "spec": metric spec, "variant": name, "objectives":
    [{"label", "values": [value per seed], "seeds": [int], "is_reference": bool,
    "tied_with_best": bool}]}``, best first (drawn top down); a ★ marks a tie with the best.
    """
    spec = payload.get("spec")
    f, fmt = _scale(spec), _hover_format(spec)
    styles = _styles(payload["objectives"])
    traces = []
    for o in payload["objectives"]:
        name = escape(o["label"]) + (" ★" if o.get("tied_with_best") else "")
        color, symbol = styles[o["label"]]
        traces.append({
            "type": "box", "orientation": "h", "name": name, "x": [f(v) for v in o["values"]],
            "text": [f"seed {s}" for s in o["seeds"]],
            "marker": {"color": color, "symbol": symbol},
            "line": {"color": color}, "fillcolor": _rgba(color, 0.08),
            "hovertemplate": f"%{{text}}: %{{x{fmt}}}<extra>{name}</extra>"})
    return {"data": traces, "layout": _layout(
        template=_template(box={"boxpoints": "all", "jitter": 0.45, "pointpos": 0,
                                "boxmean": True, "marker": {"size": 7, "opacity": 0.85},
                                "line": {"width": 1.2}}),
        height=max(260, 26 * len(traces) + 90), showlegend=False,
        margin={"l": 150, "r": 16, "t": 16, "b": 48},
        xaxis={"title": {"text": escape(payload["metric"]) + _unit(spec) + _direction(spec)},
               "zeroline": False, "gridcolor": GRID},
        yaxis={"autorange": "reversed", "automargin": True})}


def family(payload: Mapping) -> Figure:
    """The headline across each family of variants (noise rate, ε, …): a panel per family,
    on one y scale, per objective the mean with its CI band; where the objective did not
    run a variant the line and its band break, and a dotted segment joins the points on
    either side.

    ``payload`` (``webapp.leaderboard.plots.family_plot``): ``{"metric": label, "spec":
    metric spec, "shown": int, "families": [{"name", "x_label", "variants": [name], "lines":
    [{"label", "is_reference", "shown": bool, "mean_rank", "x": [float], "mean", "low",
    "high": [value or None per x]}]}]}``. A label shown in one family is drawn in all (its
    legend entry toggles them together); the others start as legend entries only.
    """
    spec = payload.get("spec")
    scale, fmt = _scale(spec), _hover_format(spec)

    # Every objective × variant × (mean, low, high) is drawn: at 200 objectives and 50
    # variants the full-precision figure is ~1 MB of digits. Six significant digits are
    # far more than a plot or its hover (the metric's own decimals) can show.
    def f(v: float | None) -> float | None:
        return _significant(scale(v), 6)

    lines = [line for fam in payload["families"] for line in fam["lines"]]
    styles = _styles(lines)
    visible: dict[str, bool] = {}
    for line in lines:
        visible[line["label"]] = visible.get(line["label"], False) or \
            line.get("shown") is not False
    layout = _layout(grid={"rows": 1, "columns": len(payload["families"]),
                           "pattern": "independent"}, height=400,
                     template=_template(scatter={"mode": "lines+markers", "line": {"width": 2},
                                                 "marker": {"size": 6}}))
    traces: list[dict] = []
    seen: set[str] = set()
    for k, fam in enumerate(payload["families"]):
        axes = _axes(k)
        layout[_axis_key("x", k)] = {
            "title": {"text": f"{escape(fam['x_label'])} · {escape(fam['name'])}"},
            "gridcolor": GRID, "zeroline": False}
        # one metric on every panel: one scale, so that panels compare at a glance and a
        # panel of one variant is not zoomed into its own interval
        layout[_axis_key("y", k)] = {
            "title": {"text": escape(payload["metric"]) + _unit(spec) if k == 0 else ""},
            "gridcolor": GRID, "zeroline": False, **({"matches": "y"} if k else {})}
        for line in fam["lines"]:
            label = line["label"]
            color, symbol = styles[label]
            name, shown = escape(label), True if visible[label] else "legendonly"
            x = [_significant(v, 6) for v in line["x"]]
            band = _band(x, [f(v) for v in line["low"]], [f(v) for v in line["high"]],
                         color, axes, label)
            band["visible"] = shown
            traces.append(band)
            means = [f(v) for v in line["mean"]]
            bridge = _bridges(x, means, color, axes, label)
            if bridge is not None:
                bridge["visible"] = shown
                traces.append(bridge)
            traces.append({  # a None is a gap (connectgaps is off by default)
                "x": x, "y": means, "type": "scatter",
                "name": name, "legendgroup": name, "showlegend": label not in seen,
                "visible": shown, **axes,
                "line": _line(color, reference=line.get("is_reference")),
                "marker": {"color": color, "symbol": symbol},
                "hovertemplate": f"{name} at %{{x}}: %{{y{fmt}}}<extra></extra>"})
            seen.add(label)
    return {"data": traces, "layout": layout}


def curves(payload: Mapping | None) -> Figure:
    """Each stored curve against its own x axis (epochs, an ε grid, …), a panel per curve
    (three per row): per objective the mean over seeds with its band (none for the
    reference, dashed), and every seed as a legend entry, hidden until clicked.

    ``payload`` (``webapp.leaderboard.plots.build_curves``): ``{"variant", "specs": [curve
    spec: {"name", "label", "x_label", "x_unit", "unit", "decimals", "log"}], "by_label":
    {label: {"is_reference": bool, "curves": {name: {"x": [float], "mean", "low", "high":
    [value or None], "seeds": {seed: [value or None]}}}}}}``. Panels follow ``specs``; a
    curve no objective stored has none.
    """
    if not payload or not payload.get("by_label"):
        return _message("No curves stored.")
    by_label = payload["by_label"]
    specs = {s["name"]: s for s in payload.get("specs") or []}
    names = [name for name in specs if any(name in e["curves"] for e in by_label.values())]
    if not names:
        return _message("No curves stored.")
    colors = _colors([{"label": label, "is_reference": e.get("is_reference")}
                      for label, e in by_label.items()])
    columns = min(len(names), 3)
    rows = math.ceil(len(names) / columns)
    layout = _layout(height=320 * rows + 60,
                     grid={"rows": rows, "columns": columns, "pattern": "independent"},
                     legend={"orientation": "h", "y": -0.22, "font": {"size": 11}},
                     margin={"l": 64, "r": 16, "t": 28, "b": 90},
                     template=_template(scatter={"mode": "lines"}))
    traces: list[dict] = []
    for k, name in enumerate(names):
        axes, spec = _axes(k), specs[name]
        f, fmt = _scale(spec), _hover_format(spec)
        x_name = escape(spec.get("x_label") or "epoch")
        title = escape(spec.get("label") or name)
        x_unit = f" ({escape(spec['x_unit'])})" if spec.get("x_unit") else ""
        layout[_axis_key("x", k)] = {"title": {"text": x_name + x_unit}, "gridcolor": GRID,
                                     "zeroline": False}
        ticks = [escape(t) for t in spec.get("x_ticks") or []]
        if ticks:  # named points (attacks): their names on the axis and in the hover
            layout[_axis_key("x", k)] |= {"tickvals": list(range(1, len(ticks) + 1)),
                                          "ticktext": ticks}
        at = "%{customdata}" if ticks else f"{x_name} %{{x}}"
        layout[_axis_key("y", k)] = {"title": {"text": title + _unit(spec)}, "gridcolor": GRID,
                                     "zeroline": False, "type": "log" if spec.get("log")
                                     else "linear", "exponentformat": "power",
                                     "minorloglabels": "none"}
        for label, entry in by_label.items():
            c = entry["curves"].get(name)
            if not c:
                continue
            who, color, ref = escape(label), colors[label], bool(entry.get("is_reference"))
            x = list(c["x"]) if c.get("x") is not None else list(range(1, len(c["mean"]) + 1))
            if not ref:
                traces.append(_band(x, [f(v) for v in c["low"]], [f(v) for v in c["high"]],
                                    color, axes, label))
            named = {"customdata": ticks[:len(x)]} if ticks else {}
            traces.append({
                "x": x, "y": [f(v) for v in c["mean"]], "type": "scatter",
                "name": f"{who} mean", "legendgroup": who, "showlegend": k == 0, **axes,
                "line": _line(color, 2, reference=ref), **named,
                "hovertemplate": f"{who} {at}: %{{y{fmt}}}<extra>{title}</extra>"})
            seeds = c.get("seeds") or {}
            for seed in _seed_keys(seeds):
                ys = seeds[seed]
                traces.append({
                    "x": x[:len(ys)], "y": [f(v) for v in ys], "type": "scatter",
                    "name": f"{who} seed {seed}", "visible": "legendonly",
                    "legendgroup": f"{who}/{seed}", "showlegend": k == 0, **axes,
                    "line": _line(color, 1), "opacity": 0.6, **named,
                    "hovertemplate": f"seed {seed} {at}: %{{y{fmt}}}<extra></extra>"})
    return {"data": traces, "layout": layout}


def scatter(payload: Mapping) -> Figure:
    """Per-seed pairs of two metrics, a series per objective (the reference hollow).

    ``payload`` (``webapp.leaderboard.plots.scatter``): ``{"x", "y": metric names,
    "x_label", "y_label", "x_spec", "y_spec": metric specs, "series": [{"label",
    "is_reference", "x", "y": [value], "text": ["variant seed n"]}]}``.
    """
    x_spec, y_spec = payload.get("x_spec"), payload.get("y_spec")
    fx, fy = _scale(x_spec), _scale(y_spec)
    styles = _styles(payload["series"])
    hover = f"%{{text}}: (%{{x{_hover_format(x_spec)}}}, %{{y{_hover_format(y_spec)}}})"
    traces = [{
        "x": [fx(v) for v in s["x"]], "y": [fy(v) for v in s["y"]], "text": list(s["text"]),
        "type": "scatter", "mode": "markers", "name": escape(s["label"]),
        "marker": {"size": 8, "color": styles[s["label"]][0], "opacity": 0.8,
                   "symbol": styles[s["label"]][1]},
        "hovertemplate": f"{hover}<extra>{escape(s['label'])}</extra>"}
        for s in payload["series"]]
    return {"data": traces, "layout": _layout(
        height=380,
        xaxis={"title": {"text": escape(payload["x_label"]) + _unit(x_spec)
                         + _direction(x_spec)}, "gridcolor": GRID},
        yaxis={"title": {"text": escape(payload["y_label"]) + _unit(y_spec)
                         + _direction(y_spec)}, "gridcolor": GRID})}


def reliability(payload: Mapping) -> Figure:
    """A reliability diagram: per objective, accuracy against mean confidence per bin
    (means over seeds, with the samples per bin in the hover text), each seed's own diagram
    hidden until clicked in the legend, and the diagonal of perfect calibration.

    ``payload`` (``webapp.leaderboard.plots.reliability``): ``{"label", "variant", "series":
    [{"label", "is_reference", "confidence", "accuracy": [value or None per bin], "count":
    [samples or None per bin], "seeds": {seed: {"confidence": [...], "accuracy": [...]}}}]}``.
    """
    colors = _colors(payload["series"])
    traces: list[dict] = [{
        "x": [0, 1], "y": [0, 1], "type": "scatter", "mode": "lines",
        "name": "perfect calibration", "line": {"color": REF, "width": 1, "dash": "dot"},
        "hoverinfo": "skip"}]
    for s in payload["series"]:
        name, color = escape(s["label"]), colors[s["label"]]
        text = ["" if n is None else f"{math.floor(n + 0.5)} samples" for n in s["count"]]
        traces.append({
            "x": list(s["confidence"]), "y": list(s["accuracy"]), "text": text,
            "type": "scatter", "mode": "lines+markers", "name": name,
            "line": _line(color, 2, reference=s.get("is_reference")),
            "marker": {"size": 7, "color": color},
            "hovertemplate": f"confidence %{{x:.3f}}: accuracy %{{y:.3f}} (%{{text}})"
                             f"<extra>{name}</extra>"})
        seeds = s.get("seeds") or {}
        for seed in _seed_keys(seeds):
            one, seed_name = seeds[seed], f"{name} seed {escape(seed)}"
            traces.append({
                "x": list(one["confidence"]), "y": list(one["accuracy"]), "type": "scatter",
                "mode": "lines+markers", "name": seed_name, "visible": "legendonly",
                "line": {"color": color, "width": 1}, "marker": {"size": 4, "color": color},
                "opacity": 0.6, "hovertemplate": "confidence %{x:.3f}: accuracy %{y:.3f}"
                                                 f"<extra>{seed_name}</extra>"})
    return {"data": traces, "layout": _layout(
        height=380,
        xaxis={"title": {"text": "mean confidence in the bin"}, "range": [0, 1],
               "gridcolor": GRID},
        yaxis={"title": {"text": "accuracy in the bin"}, "range": [0, 1], "gridcolor": GRID})}


def forest(payload: Mapping) -> Figure:
    """Paired differences of objective a over b per variant (positive = a better, whichever
    way the metric points): each seed's difference as a dot, the mean with its 95% CI.

    ``payload`` (``webapp.leaderboard.compare``): ``{"a", "b": {"label", ...},
    "headline_spec": metric spec, "higher_is_better": bool, "rows": [{"variant", "pairs":
    [[seed, a's value, b's value]], "diff": None or {"mean_diff", "diff_ci_low",
    "diff_ci_high", ...}}]}``; rows without a diff (no shared seed) are left out.
    """
    spec = payload.get("headline_spec")
    f, sign = _scale(spec), 1 if payload.get("higher_is_better") else -1
    rows = [r for r in payload["rows"] if r.get("diff")]
    names = [r["variant"] for r in rows]
    seeds = {"x": [f(sign * (p[1] - p[2])) for r in rows for p in r["pairs"]],
             "y": [r["variant"] for r in rows for _ in r["pairs"]],
             "text": [f"seed {p[0]}" for r in rows for p in r["pairs"]],
             "type": "scatter", "mode": "markers", "name": "per-seed difference",
             "marker": {"size": 6, "color": REF, "opacity": 0.55},
             "hovertemplate": "%{y} %{text}: %{x:.3g}<extra></extra>"}

    def above(d: Mapping) -> float | None:
        return 0 if d["diff_ci_high"] is None else f(d["diff_ci_high"] - d["mean_diff"])

    def below(d: Mapping) -> float | None:
        return 0 if d["diff_ci_low"] is None else f(d["mean_diff"] - d["diff_ci_low"])

    mean = {"x": [f(r["diff"]["mean_diff"]) for r in rows], "y": names, "type": "scatter",
            "mode": "markers", "name": "mean difference [95% CI]",
            "marker": {"size": 11, "color": COLORS[0], "symbol": "diamond"},
            "error_x": {"type": "data", "symmetric": False,
                        "array": [above(r["diff"]) for r in rows],
                        "arrayminus": [below(r["diff"]) for r in rows],
                        "color": COLORS[0], "thickness": 2, "width": 6},
            "hovertemplate": "%{y}: %{x:.3g}<extra></extra>"}
    a, b = escape(payload["a"]["label"]), escape(payload["b"]["label"])
    return {"data": [seeds, mean], "layout": _layout(
        height=max(260, 40 * len(names) + 100), margin={"l": 120, "r": 16, "t": 16, "b": 48},
        xaxis={"title": {"text": f"{a} better than {b} by{_unit(spec, delta=True)}"},
               "zeroline": True, "zerolinecolor": INK, "zerolinewidth": 1, "gridcolor": GRID},
        yaxis={"autorange": "reversed", "automargin": True},
        legend={"orientation": "h", "y": -0.2})}


def profile(payload: Mapping) -> Figure:
    """Performance profiles: per objective, the share of ranked variants on which its
    normalized score is within τ of the best, as a step line; the first
    :data:`PROFILE_SHOWN` and the reference drawn, the others in the legend.

    ``payload`` (``webapp.leaderboard.ranking.performance_profiles``): ``{"variants":
    [name], "tau": [float], "objectives": [{"label", "is_reference", "rho": [share per τ],
    "wins", "worst_gap"}]}``.
    """
    colors = _colors(payload["objectives"])
    traces = [{
        "x": list(payload["tau"]), "y": list(o["rho"]), "type": "scatter",
        "line": _line(colors[o["label"]], reference=o.get("is_reference")),
        "name": escape(o["label"]),
        "visible": True if i < PROFILE_SHOWN or o.get("is_reference") else "legendonly",
        "hovertemplate": f"{escape(o['label'])}: within %{{x:.3f}} of the best on "
                         "%{y:.0%} of variants<extra></extra>"}
        for i, o in enumerate(payload["objectives"])]
    return {"data": traces, "layout": _layout(
        height=380, template=_template(scatter={"mode": "lines",
                                                "line": {"shape": "hv", "width": 2}}),
        xaxis={"title": {"text": "τ: gap to the best (normalized score)"}, "gridcolor": GRID,
               "zeroline": False},
        yaxis={"title": {"text": "share of ranked variants"}, "range": [-0.02, 1.02],
               "tickformat": ".0%", "gridcolor": GRID})}


def across_suites(payload: Mapping) -> Figure:
    """An objective's profile: one panel per scored suite, its normalized score per seed on
    each ranked variant (dots, with their mean as a bar) against the suite's baselines
    (a grey band from the lowest to the highest baseline mean, the reference's mean as a
    dash). Normalized: 0 is the suite's worst anchor, 1 its best.

    ``payload`` (``webapp.leaderboard.crosssuite.profile_table``): ``{"label", "suites":
    [{"suite", "status", "reference", "seeds": {variant: [score per seed]}, "band":
    {variant: {"low", "high", "reference"}}}]}``; suites not scored are left out.
    """
    panels = [s for s in payload["suites"] if s["status"] == "scored"]
    label = escape(payload["label"])
    traces, axes, gap = [], {}, 0.06
    width = (1 - gap * max(len(panels) - 1, 0)) / max(len(panels), 1)
    for i, s in enumerate(panels):
        n = "" if i == 0 else str(i + 1)
        x_axis, y_axis = f"x{n}", f"y{n}"
        variants = [escape(v) for v in s["seeds"]]
        band = [s["band"].get(v) or {} for v in s["seeds"]]
        traces.append({
            "type": "bar", "x": variants, "base": [b.get("low") for b in band],
            "y": [None if not b else b["high"] - b["low"] for b in band],
            "xaxis": x_axis, "yaxis": y_axis, "marker": {"color": "rgba(107,119,133,0.22)"},
            "width": 0.5, "name": "baselines (lowest to highest mean)", "showlegend": i == 0,
            "legendgroup": "band", "customdata": [[b.get("low"), b.get("high")] for b in band],
            "hovertemplate": "baselines' means %{customdata[0]:.3f} to "
                             "%{customdata[1]:.3f}<extra></extra>"})
        traces.append({
            "type": "scatter", "mode": "markers", "x": variants,
            "y": [b.get("reference") for b in band], "xaxis": x_axis, "yaxis": y_axis,
            "marker": {"symbol": "line-ew-open", "size": 26, "color": REF,
                       "line": {"width": 2, "color": REF}},
            "name": "reference's mean", "showlegend": i == 0, "legendgroup": "ref",
            "hovertemplate": f"{escape(s['reference'])}: %{{y:.3f}}<extra></extra>"})
        xs = [v for v, seeds in zip(variants, s["seeds"].values(), strict=True)
              for _ in seeds]
        ys = [y for seeds in s["seeds"].values() for y in seeds]
        traces.append({
            "type": "scatter", "mode": "markers", "x": xs, "y": ys, "xaxis": x_axis,
            "yaxis": y_axis, "marker": {"size": 7, "color": COLORS[0], "opacity": 0.75},
            "name": f"{label}, per seed", "showlegend": i == 0, "legendgroup": "seeds",
            "hovertemplate": f"{label}: %{{y:.3f}}<extra></extra>"})
        traces.append({
            "type": "scatter", "mode": "markers", "x": variants,
            "y": [sum(v) / len(v) for v in s["seeds"].values()], "xaxis": x_axis,
            "yaxis": y_axis, "marker": {"symbol": "diamond", "size": 11, "color": COLORS[1]},
            "name": f"{label}, mean", "showlegend": i == 0, "legendgroup": "mean",
            "hovertemplate": f"{label} mean: %{{y:.3f}}<extra></extra>"})
        start = i * (width + gap)
        axes[f"xaxis{n}"] = {"domain": [start, start + width], "type": "category",
                             "anchor": y_axis, "title": {"text": escape(s["suite"])}}
        axes[f"yaxis{n}"] = {"anchor": x_axis, "gridcolor": GRID, "zeroline": False,
                             **({"title": {"text": "normalized score"}} if i == 0 else {})}
    return {"data": traces, "layout": _layout(
        height=380, barmode="overlay", legend={"orientation": "h", "y": -0.25}, **axes)}


def cd(payload: Mapping) -> Figure:
    """Demšar's critical-difference diagram as a dot plot: mean rank across (1 = best), one
    row per objective (best on top), the critical difference as a bar from the best, and
    each group the critical difference cannot separate as a bar of its own lane right of
    the ranks, over the rows it joins (lanes never overlap, however many groups share
    rows). Where the CD spans most of the ranks, a line under the plot says that the ranks
    are mostly not resolved.

    ``payload`` (``webapp.leaderboard.ranking.critical_difference``): ``{"variants",
    "alpha", "cd": float, "friedman_p", "objectives": [{"label", "is_reference",
    "mean_rank"}] (best first), "groups": [[first, last] row indices]}``.
    """
    objectives = payload["objectives"]
    names = [escape(o["label"]) for o in objectives]
    ranks = [o["mean_rank"] for o in objectives]
    n = len(objectives)
    traces = [{"x": ranks, "y": names, "type": "scatter", "mode": "markers",
               "marker": {"size": 9, "color": "#2a6fb0"}, "name": "mean rank",
               "showlegend": False, "hovertemplate": "%{y}: mean rank %{x:.2f}<extra></extra>"}]
    width = payload["cd"]
    shown = Decimal(width).quantize(Decimal("0.01"), ROUND_HALF_UP)  # JavaScript's toFixed(2)
    traces.append({"x": [ranks[0], ranks[0] + width], "y": [names[0], names[0]],
                   "type": "scatter", "mode": "lines+markers",
                   "line": {"width": 2, "color": "#b03a2e"},
                   "marker": {"symbol": "line-ns-open", "size": 12, "color": "#b03a2e"},
                   "name": f"critical difference {shown}", "hoverinfo": "name"})
    lane = n + 0.5 + LANE  # the groups' lanes start right of the last possible rank
    for k, (first, last) in enumerate(payload["groups"]):
        traces.append({"x": [lane + k * LANE] * 2, "y": [names[first], names[last]],
                       "type": "scatter", "mode": "lines",
                       "line": {"width": 5, "color": "rgba(90,90,90,0.55)"},
                       "name": "not separated by the CD", "legendgroup": "groups",
                       "showlegend": k == 0, "hoverinfo": "text",
                       "text": f"{names[first]} … {names[last]}: not separated"})
    notes = []
    if n > 2 and width > 0.5 * (n - 1):
        notes.append({"text": f"The critical difference ({shown}) spans more than half of the "
                              f"{n} ranks: with {len(payload['variants'])} variants most ranks are "
                              f"not resolved.", "xref": "paper", "yref": "paper", "x": 0,
                      "y": 1.0, "yanchor": "bottom", "xanchor": "left", "showarrow": False,
                      "font": {"size": 12, "color": "#b03a2e"}})
    groups = len(payload["groups"])
    return {"data": traces, "layout": _layout(
        xaxis={"title": {"text": "mean rank over the ranked variants (1 = best)"},
               "range": [0.5, n + 0.5 + LANE * (groups + 1) * bool(groups)],
               "tickvals": list(range(1, n + 1)), "gridcolor": GRID, "zeroline": False},
        yaxis={"autorange": "reversed", "automargin": True, "type": "category",
               "categoryarray": names},
        annotations=notes, margin={"l": 64, "r": 16, "t": 44 if notes else 28, "b": 48},
        height=max(240, 26 * n + 90), legend={"orientation": "h", "y": -0.2})}


LANE = 0.3  # rank units between the CD diagram's group lanes


def variance(payload: Mapping) -> Figure:
    """Each seed stream's share of the variance between seeds, per objective: grouped
    horizontal bars (in %) with the share's 95% interval as an error bar.

    ``payload`` (``webapp.leaderboard.factorial.variance_sources(...)["plot"]``):
    ``{"objectives": [label], "sources": [{"name", "label", "share", "low", "high":
    [fraction or None per objective]}]}``.
    """

    pct = _percent_of
    y = [escape(o) for o in payload["objectives"]]
    traces = [{
        "x": [pct(v) for v in s["share"]], "y": y, "type": "bar", "orientation": "h",
        "name": escape(s["name"]), "marker": {"color": COLORS[i % len(COLORS)]},
        "error_x": {"type": "data", "symmetric": False, "color": INK, "thickness": 1.2,
                    "width": 4,
                    "array": [0 if v is None else pct(high - v)
                              for v, high in zip(s["share"], s["high"], strict=True)],
                    "arrayminus": [0 if v is None else pct(v - low)
                                   for v, low in zip(s["share"], s["low"], strict=True)]},
        "hovertemplate": f"%{{y}} · {escape(s['label'])}: %{{x:.0f}}%<extra></extra>"}
        for i, s in enumerate(payload["sources"])]
    return {"data": traces, "layout": _layout(
        barmode="group", height=max(240, 90 * len(payload["objectives"]) + 90),
        margin={"l": 120, "r": 16, "t": 16, "b": 48},
        xaxis={"title": {"text": "share of the variance between seeds (%), 95% interval"},
               "range": [0, 102], "gridcolor": GRID},
        yaxis={"autorange": "reversed", "automargin": True, "type": "category"})}


def heatmap(payload: Mapping) -> Figure:
    """Objectives × metrics of one variant, the mean over seeds in each cell; one direction
    and unit for every column, so the colour scale is oriented once (darker = better) and
    a missing value stays blank.

    ``payload`` (``webapp.leaderboard.plots.heatmap``): ``{"label", "variant", "spec":
    metric spec of the first column, "metrics": [metric spec], "columns": [short name],
    "objectives": [label], "is_reference": [bool], "z": [[mean or None per column] per
    objective]}``.
    """
    spec = payload.get("spec")
    f, fmt = _scale(spec), _hover_format(spec)
    lower = spec is not None and spec.get("better") == "lower"
    metric_labels = [escape(m["label"]) for m in payload["metrics"]]
    trace = {"type": "heatmap", "x": [escape(c) for c in payload["columns"]],
             "y": [escape(o) for o in payload["objectives"]],
             "z": [[f(v) for v in row] for row in payload["z"]],
             "text": [list(metric_labels) for _ in payload["objectives"]],
             "colorscale": [[0, "#f7fbe9"], [0.5, "#7fc0b8"], [1, "#253494"]],
             "reversescale": lower, "hoverongaps": False, "xgap": 1, "ygap": 1,
             "colorbar": {"title": {"text": ("lower" if lower else "higher") + " is better"
                                    + _unit(spec)}},
             "hovertemplate": f"%{{y}}<br>%{{text}}: %{{z{fmt}}}<extra></extra>"}
    return {"data": [trace], "layout": _layout(
        height=max(380, 28 * len(payload["objectives"]) + 110),
        margin={"l": 150, "r": 16, "t": 16, "b": 60},
        xaxis={"side": "bottom", "type": "category"},
        yaxis={"autorange": "reversed", "automargin": True, "type": "category"})}


KINDS: dict[str, Callable[[Any], Figure]] = {
    "strip": strip, "family": family, "curves": curves, "scatter": scatter,
    "reliability": reliability, "forest": forest, "profile": profile, "cd": cd,
    "across_suites": across_suites,
    "variance": variance, "heatmap": heatmap}


def build(kind: str, payload: Mapping) -> Figure:
    """The figure dict of a ``kind`` of plot (a key of :data:`KINDS`) from its payload."""
    try:
        draw = KINDS[kind]
    except KeyError:
        raise ValueError(f"no figure kind {kind!r} (one of {', '.join(KINDS)})") from None
    return draw(payload)


def figure(kind: str, payload: Mapping) -> go.Figure:
    """The same figure as a ``plotly.graph_objects.Figure``, validated by plotly, for a
    notebook (it renders inline)."""
    import plotly.graph_objects as go

    return go.Figure(build(kind, payload))


def _tuned_track(kind: str) -> Callable[[Any], Figure]:
    """The tuned track's plots live in harness/report/tuning_figures.py, which draws with
    this module's helpers: imported when first drawn, so neither import order breaks."""
    def draw(payload: Any) -> Figure:
        from harness.report import tuning_figures

        return getattr(tuning_figures, kind)(payload)
    return draw


KINDS.update(budget=_tuned_track("budget"), sensitivity=_tuned_track("sensitivity"))
