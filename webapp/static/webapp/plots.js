/* Plots of the leaderboard pages, drawn with the bundled plotly.min.js (never a CDN).
 *
 * Every <div class="plot" data-plot="KIND" data-source="ID"> reads its data from the
 * <script type="application/json" id="ID"> written by Django's json_script, and is
 * drawn by renderers[KIND]. Kinds: strip (per-seed values per objective), family
 * (headline across a variant family with CI bands), curves (each stored curve against its
 * own x axis, mean with a band, one legend entry per seed), scatter (per-seed metric
 * pairs), reliability (accuracy against confidence per bin), forest (paired improvements
 * per variant), heatmap (objectives × metrics of one variant: {objectives, columns,
 * metrics: [spec], spec, z: [[mean or null]]}; one direction and unit for all columns, so
 * the colour scale is oriented once: darker = better; null cells stay blank), variance
 * (each seed stream's share of the seed variance per objective, with its interval).
 *
 * Every value arrives in its metric's stored unit with the metric's spec ({unit,
 * decimals, better}); percents are drawn ×100, as the tables show them
 * (harness.suite.format_value is the rule on the server side).
 */
(function () {
  "use strict";
  var COLORS = ["#2357a6", "#d9730d", "#2e8540", "#b5302a", "#7a4fb0", "#8c564b", "#c2418f",
                "#3b9ab2", "#a8a116", "#4d4d4d"];
  var REF = "#6b7785";
  var CONFIG = {displaylogo: false, responsive: true,
                modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d"]};

  function base(extra) {
    var layout = {margin: {l: 64, r: 16, t: 28, b: 48}, hovermode: "closest",
                  font: {family: "system-ui, -apple-system, 'Segoe UI', sans-serif", size: 12,
                         color: "#1d232a"},
                  paper_bgcolor: "#fff", plot_bgcolor: "#fff",
                  legend: {orientation: "v", x: 1.01, y: 1, font: {size: 11}}};
    for (var k in extra) { layout[k] = extra[k]; }
    return layout;
  }
  function isPercent(spec) { return !!spec && spec.unit === "percent"; }
  function scale(spec) {
    var percent = isPercent(spec);
    return function (v) { return v === null || v === undefined ? null : (percent ? 100 * v : v); };
  }
  function unit(spec, delta) { return isPercent(spec) ? (delta ? " (pp)" : " (%)") : ""; }
  function direction(spec) {
    return spec && spec.better && spec.better !== "neither" ? " — " + spec.better + " is better" : "";
  }
  function hoverFormat(spec) {
    if (!spec) { return ":.4g"; }
    if (spec.unit === "pvalue") { return ":.2e"; }
    var decimals = spec.decimals === undefined ? 3 : spec.decimals;
    return ":." + decimals + "f";
  }
  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function rgba(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }
  function colorFor(labels) {
    var map = {}, i = 0;
    labels.forEach(function (l) { if (!(l.label in map)) {
      map[l.label] = l.is_reference ? REF : COLORS[i++ % COLORS.length]; } });
    return map;
  }
  // The CI band as one closed polygon per run of consecutive points: a point without a
  // band (a variant not run) separates two polygons (a null ends a "toself" shape).
  function band(x, low, high, color, axes, group) {
    var xs = [], ys = [], i = 0;
    while (i < x.length) {
      if (high[i] === null || low[i] === null) { i++; continue; }
      var j = i;
      while (j < x.length && high[j] !== null && low[j] !== null) { j++; }
      if (xs.length) { xs.push(null); ys.push(null); }
      for (var a = i; a < j; a++) { xs.push(x[a]); ys.push(high[a]); }
      for (var b = j - 1; b >= i; b--) { xs.push(x[b]); ys.push(low[b]); }
      i = j;
    }
    return {x: xs, y: ys, type: "scatter", mode: "lines", fill: "toself", line: {width: 0},
            fillcolor: rgba(color, 0.14), hoverinfo: "skip", showlegend: false,
            legendgroup: group, xaxis: axes[0], yaxis: axes[1]};
  }
  function axisNames(k) { return k === 0 ? ["x", "y"] : ["x" + (k + 1), "y" + (k + 1)]; }
  function axisKey(prefix, k) { return k === 0 ? prefix + "axis" : prefix + "axis" + (k + 1); }

  var renderers = {};

  renderers.strip = function (el, d) {
    var f = scale(d.spec), fmt = hoverFormat(d.spec);
    var colors = colorFor(d.objectives.map(function (o) { return {label: o.label, is_reference: o.is_reference}; }));
    var traces = d.objectives.map(function (o) {
      var name = esc(o.label) + (o.tied_with_best ? " ★" : "");
      return {type: "box", orientation: "h", name: name, x: o.values.map(f),
              text: o.seeds.map(function (s) { return "seed " + s; }),
              boxpoints: "all", jitter: 0.45, pointpos: 0, boxmean: true,
              marker: {color: colors[o.label], size: 7, opacity: 0.85},
              line: {color: colors[o.label], width: 1.2}, fillcolor: rgba(colors[o.label], 0.08),
              hovertemplate: "%{text}: %{x" + fmt + "}<extra>" + name + "</extra>"};
    });
    Plotly.newPlot(el, traces, base({
      height: Math.max(260, 26 * traces.length + 90), showlegend: false,
      margin: {l: 150, r: 16, t: 16, b: 48},
      xaxis: {title: {text: esc(d.metric) + unit(d.spec) + direction(d.spec)},
              zeroline: false, gridcolor: "#eef1f4"},
      yaxis: {autorange: "reversed", automargin: true}}), CONFIG);
  };

  renderers.family = function (el, d) {
    var f = scale(d.spec), fmt = hoverFormat(d.spec), traces = [], layout = base({});
    var labels = [];
    d.families.forEach(function (fam) { fam.lines.forEach(function (l) { labels.push(l); }); });
    // shown at first: what the server chose across each family (l.shown); a label shown
    // in one family is shown in all, as its legend entry toggles them together
    var colors = colorFor(labels), seen = {}, visible = {};
    labels.forEach(function (l) { visible[l.label] = visible[l.label] || l.shown !== false; });
    var n = d.families.length;
    layout.grid = {rows: 1, columns: n, pattern: "independent"};
    layout.height = 400;
    d.families.forEach(function (fam, k) {
      var axes = axisNames(k);
      layout[axisKey("x", k)] = {title: {text: esc(fam.x_label) + " · " + esc(fam.name)}, gridcolor: "#eef1f4", zeroline: false};
      layout[axisKey("y", k)] = {title: {text: k === 0 ? esc(d.metric) + unit(d.spec) : ""}, gridcolor: "#eef1f4", zeroline: false};
      fam.lines.forEach(function (l) {
        var color = colors[l.label], vis = visible[l.label] ? true : "legendonly";
        var b = band(l.x, l.low.map(f), l.high.map(f), color, axes, l.label);
        b.visible = vis;
        traces.push(b);
        traces.push({x: l.x, y: l.mean.map(f), type: "scatter", mode: "lines+markers",
                     connectgaps: false,
                     name: esc(l.label), legendgroup: l.label, showlegend: !seen[l.label],
                     visible: vis, xaxis: axes[0], yaxis: axes[1],
                     line: {color: color, width: 2, dash: l.is_reference ? "dash" : "solid"},
                     marker: {size: 6, color: color},
                     hovertemplate: esc(l.label) + " at %{x}: %{y" + fmt + "}<extra></extra>"});
        seen[l.label] = true;
      });
    });
    Plotly.newPlot(el, traces, layout, CONFIG);
  };

  renderers.curves = function (el, d) {
    if (!d || !d.by_label) { el.textContent = "No curves stored."; return; }
    var names = [], labels = [], specs = {};
    (d.specs || []).forEach(function (s) { specs[s.name] = s; });
    Object.keys(d.by_label).forEach(function (label) {
      labels.push({label: label, is_reference: d.by_label[label].is_reference});
    });
    // the suite's declared order; a curve no seed stored is left out
    (d.specs || []).forEach(function (s) {
      if (labels.some(function (l) { return d.by_label[l.label].curves[s.name]; })) {
        names.push(s.name);
      }
    });
    if (!names.length) { el.textContent = "No curves stored."; return; }
    var colors = colorFor(labels), traces = [];
    var layout = base({height: 380, grid: {rows: 1, columns: names.length, pattern: "independent"},
                       legend: {orientation: "h", y: -0.22, font: {size: 11}}});
    layout.margin.b = 90;
    // Panels wrap at three per row; each curve is drawn against its own declared x axis.
    var columns = Math.min(names.length, 3), rows = Math.ceil(names.length / columns);
    layout.grid = {rows: rows, columns: columns, pattern: "independent"};
    layout.height = 320 * rows + 60;
    names.forEach(function (name, k) {
      var axes = axisNames(k), spec = specs[name];
      var f = scale(spec), fmt = hoverFormat(spec), xName = esc(spec.x_label || "epoch");
      layout[axisKey("x", k)] = {title: {text: xName + (spec.x_unit ? " (" + esc(spec.x_unit) + ")" : "")},
                                 gridcolor: "#eef1f4", zeroline: false};
      layout[axisKey("y", k)] = {title: {text: esc(spec.label || name) + unit(spec)},
                                 gridcolor: "#eef1f4", zeroline: false,
                                 type: spec.log ? "log" : "linear",
                                 exponentformat: "power", minorloglabels: "none"};
      labels.forEach(function (l) {
        var c = d.by_label[l.label].curves[name];
        if (!c) { return; }
        var color = colors[l.label];
        var x = c.x || c.mean.map(function (_, i) { return i + 1; });
        if (!l.is_reference) { traces.push(band(x, c.low.map(f), c.high.map(f), color, axes, l.label)); }
        traces.push({x: x, y: c.mean.map(f), type: "scatter", mode: "lines", name: esc(l.label) + " mean",
                     legendgroup: l.label, showlegend: k === 0, xaxis: axes[0], yaxis: axes[1],
                     line: {color: color, width: 2, dash: l.is_reference ? "dash" : "solid"},
                     hovertemplate: esc(l.label) + " " + xName + " %{x}: %{y" + fmt + "}<extra>" + esc(spec.label || name) + "</extra>"});
        if (c.seeds) {
          Object.keys(c.seeds).forEach(function (seed) {
            var ys = c.seeds[seed];
            traces.push({x: x.slice(0, ys.length), y: ys.map(f), type: "scatter",
                         mode: "lines", name: esc(l.label) + " seed " + seed, visible: "legendonly",
                         legendgroup: l.label + "/" + seed, showlegend: k === 0,
                         xaxis: axes[0], yaxis: axes[1], line: {color: color, width: 1},
                         opacity: 0.6,
                         hovertemplate: "seed " + seed + " " + xName + " %{x}: %{y" + fmt + "}<extra></extra>"});
          });
        }
      });
    });
    Plotly.newPlot(el, traces, layout, CONFIG);
  };

  renderers.scatter = function (el, d) {
    var colors = colorFor(d.series), fx = scale(d.x_spec), fy = scale(d.y_spec);
    var traces = d.series.map(function (s) {
      return {x: s.x.map(fx), y: s.y.map(fy), text: s.text, type: "scatter",
              mode: "markers", name: esc(s.label),
              marker: {size: 8, color: colors[s.label], opacity: 0.8,
                       symbol: s.is_reference ? "circle-open" : "circle"},
              hovertemplate: "%{text}: (%{x" + hoverFormat(d.x_spec) + "}, %{y" + hoverFormat(d.y_spec) + "})<extra>" + esc(s.label) + "</extra>"};
    });
    Plotly.newPlot(el, traces, base({height: 380,
      xaxis: {title: {text: esc(d.x_label) + unit(d.x_spec) + direction(d.x_spec)}, gridcolor: "#eef1f4"},
      yaxis: {title: {text: esc(d.y_label) + unit(d.y_spec) + direction(d.y_spec)}, gridcolor: "#eef1f4"}}), CONFIG);
  };

  renderers.reliability = function (el, d) {
    var colors = colorFor(d.series), traces = [{x: [0, 1], y: [0, 1], type: "scatter", mode: "lines",
      name: "perfect calibration", line: {color: REF, width: 1, dash: "dot"}, hoverinfo: "skip"}];
    d.series.forEach(function (s) {
      var text = s.count.map(function (n) { return n === null ? "" : Math.round(n) + " samples"; });
      traces.push({x: s.confidence, y: s.accuracy, text: text, type: "scatter", mode: "lines+markers",
                   name: esc(s.label), line: {color: colors[s.label], width: 2,
                                               dash: s.is_reference ? "dash" : "solid"},
                   marker: {size: 7, color: colors[s.label]},
                   hovertemplate: "confidence %{x:.3f}: accuracy %{y:.3f} (%{text})<extra>" + esc(s.label) + "</extra>"});
      Object.keys(s.seeds || {}).forEach(function (seed) {  // hidden until clicked in the legend
        var one = s.seeds[seed];
        traces.push({x: one.confidence, y: one.accuracy, type: "scatter", mode: "lines+markers",
                     name: esc(s.label) + " seed " + esc(seed), visible: "legendonly",
                     line: {color: colors[s.label], width: 1}, marker: {size: 4, color: colors[s.label]},
                     opacity: 0.6, hovertemplate: "confidence %{x:.3f}: accuracy %{y:.3f}<extra>" +
                     esc(s.label) + " seed " + esc(seed) + "</extra>"});
      });
    });
    Plotly.newPlot(el, traces, base({height: 380,
      xaxis: {title: {text: "mean confidence in the bin"}, range: [0, 1], gridcolor: "#eef1f4"},
      yaxis: {title: {text: "accuracy in the bin"}, range: [0, 1], gridcolor: "#eef1f4"}}), CONFIG);
  };

  renderers.forest = function (el, d) {
    var f = scale(d.headline_spec), sign = d.higher_is_better ? 1 : -1;
    var rows = d.rows.filter(function (r) { return r.diff; });
    var names = rows.map(function (r) { return r.variant; });
    var dots = {x: [], y: [], text: []};
    rows.forEach(function (r) {
      r.pairs.forEach(function (p) {
        dots.x.push(f(sign * (p[1] - p[2]))); dots.y.push(r.variant); dots.text.push("seed " + p[0]);
      });
    });
    var mean = {x: rows.map(function (r) { return f(r.diff.mean_diff); }), y: names,
                type: "scatter", mode: "markers", name: "mean difference [95% CI]",
                marker: {size: 11, color: COLORS[0], symbol: "diamond"},
                error_x: {type: "data", symmetric: false,
                          array: rows.map(function (r) { return r.diff.diff_ci_high === null ? 0 : f(r.diff.diff_ci_high - r.diff.mean_diff); }),
                          arrayminus: rows.map(function (r) { return r.diff.diff_ci_low === null ? 0 : f(r.diff.mean_diff - r.diff.diff_ci_low); }),
                          color: COLORS[0], thickness: 2, width: 6},
                hovertemplate: "%{y}: %{x:.3g}<extra></extra>"};
    var seeds = {x: dots.x, y: dots.y, text: dots.text, type: "scatter", mode: "markers",
                 name: "per-seed difference", marker: {size: 6, color: REF, opacity: 0.55},
                 hovertemplate: "%{y} %{text}: %{x:.3g}<extra></extra>"};
    Plotly.newPlot(el, [seeds, mean], base({
      height: Math.max(260, 40 * names.length + 100),
      margin: {l: 120, r: 16, t: 16, b: 48},
      xaxis: {title: {text: esc(d.a.label) + " better than " + esc(d.b.label) + " by" + unit(d.headline_spec, true)},
              zeroline: true, zerolinecolor: "#1d232a", zerolinewidth: 1, gridcolor: "#eef1f4"},
      yaxis: {autorange: "reversed", automargin: true},
      legend: {orientation: "h", y: -0.2}}), CONFIG);
  };

  renderers.profile = function (el, d) {
    var labels = d.objectives.map(function (o) { return {label: o.label, is_reference: o.is_reference}; });
    var colors = colorFor(labels);
    var traces = d.objectives.map(function (o, i) {
      return {x: d.tau, y: o.rho, type: "scatter", mode: "lines", line: {shape: "hv", width: 2,
              color: colors[o.label], dash: o.is_reference ? "dash" : "solid"},
              name: esc(o.label), visible: i < 8 || o.is_reference ? true : "legendonly",
              hovertemplate: esc(o.label) + ": within %{x:.3f} of the best on %{y:.0%} of variants<extra></extra>"};
    });
    Plotly.newPlot(el, traces, base({
      xaxis: {title: {text: "τ: gap to the best (normalized score)"}, gridcolor: "#eef1f4", zeroline: false},
      yaxis: {title: {text: "share of ranked variants"}, range: [-0.02, 1.02], tickformat: ".0%", gridcolor: "#eef1f4"},
      height: 380}), CONFIG);
  };

  // Demšar's diagram as a dot plot: mean rank across, one row per objective (best on top),
  // a shaded box over each group the critical difference cannot separate, and the CD.
  renderers.cd = function (el, d) {
    var n = d.objectives.length, names = d.objectives.map(function (o) { return esc(o.label); });
    var traces = [{x: d.objectives.map(function (o) { return o.mean_rank; }), y: names,
                   type: "scatter", mode: "markers", marker: {size: 9, color: "#2a6fb0"},
                   name: "mean rank", showlegend: false,
                   hovertemplate: "%{y}: mean rank %{x:.2f}<extra></extra>"}];
    // a group: a shaded box over its objectives' rows, from the lowest mean rank to the highest
    var shapes = d.groups.map(function (g) {
      return {type: "rect", xref: "x", yref: "y", layer: "below", line: {width: 0},
              fillcolor: "rgba(120,120,120,0.16)",
              x0: d.objectives[g[0]].mean_rank - 0.15, x1: d.objectives[g[1]].mean_rank + 0.15,
              y0: g[0] - 0.4, y1: g[1] + 0.4};
    });
    var first = d.objectives[0].mean_rank;
    traces.push({x: [first, first + d.cd], y: [names[0], names[0]], type: "scatter",
                 mode: "lines+markers", line: {width: 2, color: "#b03a2e"}, marker: {symbol: "line-ns-open", size: 12, color: "#b03a2e"},
                 name: "critical difference " + d.cd.toFixed(2), hoverinfo: "name"});
    var layout = base({
      xaxis: {title: {text: "mean rank over the ranked variants (1 = best)"}, range: [0.5, n + 0.5], gridcolor: "#eef1f4", zeroline: false},
      yaxis: {autorange: "reversed", automargin: true, type: "category", categoryarray: names},
      shapes: shapes, height: Math.max(240, 26 * n + 90), legend: {orientation: "h", y: -0.2}});
    Plotly.newPlot(el, traces, layout, CONFIG);
  };

  // Each seed stream's share of the variance between seeds, per objective: grouped bars
  // with the 95% interval of the share as an error bar.
  renderers.variance = function (el, d) {
    var pct = function (v) { return v === null ? null : 100 * v; };
    var traces = d.sources.map(function (s, i) {
      return {x: s.share.map(pct), y: d.objectives.map(esc), type: "bar", orientation: "h",
              name: esc(s.name), marker: {color: COLORS[i % COLORS.length]},
              error_x: {type: "data", symmetric: false, color: "#1d232a", thickness: 1.2, width: 4,
                        array: s.share.map(function (v, k) { return v === null ? 0 : pct(s.high[k] - v); }),
                        arrayminus: s.share.map(function (v, k) { return v === null ? 0 : pct(v - s.low[k]); })},
              hovertemplate: "%{y} · " + esc(s.label) + ": %{x:.0f}%<extra></extra>"};
    });
    Plotly.newPlot(el, traces, base({
      barmode: "group", height: Math.max(240, 90 * d.objectives.length + 90),
      margin: {l: 120, r: 16, t: 16, b: 48},
      xaxis: {title: {text: "share of the variance between seeds (%), 95% interval"}, range: [0, 102], gridcolor: "#eef1f4"},
      yaxis: {autorange: "reversed", automargin: true, type: "category"}}), CONFIG);
  };

  renderers.heatmap = function (el, d) {
    var f = scale(d.spec), fmt = hoverFormat(d.spec);
    var labels = d.objectives.map(function (o) { return d.metrics.map(function (m) { return esc(m.label); }); });
    var lower = d.spec && d.spec.better === "lower";
    // light = worse, dark = better, whichever way the metrics point
    var colors = [[0, "#f7fbe9"], [0.5, "#7fc0b8"], [1, "#253494"]];
    var trace = {type: "heatmap", x: d.columns.map(esc), y: d.objectives.map(esc),
                 z: d.z.map(function (row) { return row.map(f); }), text: labels,
                 colorscale: colors, reversescale: lower, hoverongaps: false, xgap: 1, ygap: 1,
                 colorbar: {title: {text: (lower ? "lower" : "higher") + " is better" + unit(d.spec)}},
                 hovertemplate: "%{y}<br>%{text}: %{z" + fmt + "}<extra></extra>"};
    Plotly.newPlot(el, [trace], base({
      height: Math.max(380, 28 * d.objectives.length + 110),
      margin: {l: 150, r: 16, t: 16, b: 60},
      xaxis: {side: "bottom", type: "category"},
      yaxis: {autorange: "reversed", automargin: true, type: "category"}}), CONFIG);
  };

  function draw() {
    if (typeof Plotly === "undefined") { return; }
    var plots = document.querySelectorAll("div.plot[data-plot]");
    Array.prototype.forEach.call(plots, function (el) {
      var source = document.getElementById(el.getAttribute("data-source"));
      var render = renderers[el.getAttribute("data-plot")];
      if (!source || !render) { return; }
      try {
        render(el, JSON.parse(source.textContent));
        el.setAttribute("data-rendered", "true");
      } catch (err) {
        el.textContent = "This plot could not be drawn.";
        if (window.console) { console.error(err); }
      }
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
}());
