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

  function draw() {
    if (typeof Plotly === "undefined") { return; }
    var plots = document.querySelectorAll("div.plot[data-plot]");
    Array.prototype.forEach.call(plots, function (el) {
      var source = document.getElementById(el.getAttribute("data-source"));
      if (!source) { return; }
      try {
        var fig = JSON.parse(source.textContent);
        if (!fig || !fig.data || !fig.layout) { throw new Error("no figure"); }
        Plotly.newPlot(el, fig.data, fig.layout, CONFIG);
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
