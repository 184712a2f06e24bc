/* Leaderboard tables: click a column header to sort (numbers by the cell's data-value,
 * empty values last), click again to reverse; filter forms apply on change. Everything
 * also works without JavaScript (the filters have an Apply button). */
(function () {
  "use strict";

  function key(cell, numeric) {
    if (!cell) { return null; }
    var raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent;
    raw = raw.trim();
    if (!numeric) { return raw.toLowerCase(); }
    if (raw === "" || raw === "None") { return null; }
    var v = parseFloat(raw.replace("−", "-"));
    return isNaN(v) ? null : v;
  }

  function sortBy(table, index, th) {
    var numeric = th.getAttribute("data-type") !== "text";
    var descending = th.getAttribute("aria-sort") !== "descending";
    if (!numeric) { descending = th.getAttribute("aria-sort") === "ascending"; }
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[index], numeric), y = key(b.cells[index], numeric);
      if (x === null && y === null) { return 0; }
      if (x === null) { return 1; }
      if (y === null) { return -1; }
      if (x < y) { return descending ? 1 : -1; }
      if (x > y) { return descending ? -1 : 1; }
      return 0;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) {
      c.removeAttribute("aria-sort");
    });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
      if (!table.tHead || !table.tBodies.length) { return; }
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
        th.setAttribute("tabindex", "0");
        th.title = th.title || "sort";
        var handler = function (event) {
          if (event.target.closest("a")) { return; }
          sortBy(table, index, th);
        };
        th.addEventListener("click", handler);
        th.addEventListener("keydown", function (event) {
          if (event.key === "Enter" || event.key === " ") { event.preventDefault(); handler(event); }
        });
      });
    });
    // a table wider than its frame: say so under it (and again when the window resizes)
    var hints = [];
    Array.prototype.forEach.call(document.querySelectorAll(".table-wrap"), function (wrap) {
      var hint = document.createElement("p");
      hint.className = "scroll-hint";
      hint.hidden = true;
      wrap.parentNode.insertBefore(hint, wrap.nextSibling);
      hints.push([wrap, hint]);
    });
    function showHints() {
      hints.forEach(function (pair) {
        var wrap = pair[0], hint = pair[1], table = wrap.querySelector("table");
        var hidden = 0;
        if (table && table.tHead && wrap.scrollWidth > wrap.clientWidth + 1) {
          var right = wrap.getBoundingClientRect().right;
          Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
            if (th.getBoundingClientRect().right > right + 1) { hidden++; }
          });
        }
        hint.hidden = hidden === 0;
        hint.textContent = hidden ? hidden + " more column" + (hidden > 1 ? "s" : "") +
          " to the right: scroll the table sideways →" : "";
      });
    }
    showHints();
    window.addEventListener("resize", showHints);
    hints.forEach(function (pair) { pair[0].addEventListener("scroll", showHints, {passive: true}); });
    Array.prototype.forEach.call(document.querySelectorAll("form[data-autosubmit]"), function (form) {
      form.addEventListener("change", function () { form.submit(); });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
}());
