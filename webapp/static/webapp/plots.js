/* Plots of the leaderboard pages, drawn with the bundled plotly.min.js (never a CDN).
 *
 * Every <div class="plot" data-plot="KIND" data-source="ID"> reads its figure,
 * {data: [traces], layout: {...}}, from the <script type="application/json" id="ID">
 * written by Django's json_script. The figure is built on the server by
 * harness/figures.py (one function per KIND, the same a notebook calls); here the
 * browser only draws it, with the page's responsive configuration.
 */
(function () {
  "use strict";
  var CONFIG = {displaylogo: false, responsive: true,
                modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d"]};

  var NARROW = 600;  // px: below it a plot is laid out for a phone
  var PANEL = 260;  // px: a panel's height when panels are stacked

  // On a phone, side-by-side panels of ~40 px each with overlapping ticks are unreadable:
  // stack a grid's panels one per row, put the legend under the plot and leave the axis
  // titles room. The figure's data are untouched.
  function forWidth(layout, width) {
    if (width >= NARROW) { return layout; }
    var out = Object.assign({}, layout);
    var grid = layout.grid;
    var panels = grid ? (grid.rows || 1) * (grid.columns || 1) : 1;
    if (grid && (grid.columns || 1) > 1) {
      out.grid = Object.assign({}, grid, {rows: panels, columns: 1, ygap: 0.35});
      out.height = PANEL * panels + 120;
    }
    out.legend = Object.assign({}, layout.legend || {},
                               {orientation: "h", x: 0, xanchor: "left", y: -0.12 / panels,
                                yanchor: "top"});
    var margin = Object.assign({}, layout.margin || {});
    margin.r = 8;
    margin.b = Math.max(margin.b || 0, 64);
    margin.l = Math.max(margin.l || 0, 56);
    out.margin = margin;
    out.height = Math.max(out.height || 0, (layout.height || 320) + 80);
    return out;
  }

  function draw() {
    if (typeof Plotly === "undefined") { return; }
    var plots = document.querySelectorAll("div.plot[data-plot]");
    Array.prototype.forEach.call(plots, function (el) {
      var source = document.getElementById(el.getAttribute("data-source"));
      if (!source) { return; }
      try {
        var fig = JSON.parse(source.textContent);
        if (!fig || !fig.data || !fig.layout) { throw new Error("no figure"); }
        Plotly.newPlot(el, fig.data, forWidth(fig.layout, el.clientWidth || window.innerWidth),
                       CONFIG);
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
