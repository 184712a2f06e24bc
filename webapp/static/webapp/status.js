// Run status page: poll /runs/<pk>/status.json and update the table in place
// until every cell has a final status. No page reloads; text only (no innerHTML).
(function () {
  "use strict";
  var root = document.getElementById("run-status");
  if (!root) return;
  var url = root.dataset.statusUrl;
  var INTERVAL_MS = 1500;

  function setText(el, text) {
    if (el && el.textContent !== text) el.textContent = text;
  }

  // Control characters (C0 but tab and newline, DEL, C1), bidi embeddings, overrides and
  // isolates, and lone surrogates, written as \x1b / \u202e: the objective's text shown
  // as what it is, as the page's |printable filter (harness/textsafe.py) renders it.
  var UNPRINTABLE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

  function printable(text) {
    return text.replace(UNPRINTABLE, function (c) {
      var code = c.charCodeAt(0), hex = code.toString(16);
      return code < 0x100 ? "\\x" + ("0" + hex).slice(-2) : "\\u" + ("000" + hex).slice(-4);
    });
  }

  // The owner's error text and captured output (null for everyone else).
  function renderDetails(row, cell) {
    var details = row.querySelector(".cell-details");
    if (!details) return;
    var error = row.querySelector(".cell-error"), output = row.querySelector(".cell-output");
    setText(error, printable(cell.error || ""));
    error.hidden = !cell.error;
    setText(output, printable(cell.captured || ""));
    output.hidden = !cell.captured;
    details.hidden = !(cell.error || cell.captured);
  }

  function render(run) {
    run.cells.forEach(function (cell) {
      var row = root.querySelector('tr[data-cell="' + cell.id + '"]');
      if (!row) return;
      var st = row.querySelector(".st");
      setText(st, cell.label);
      st.className = "st status-" + cell.status;
      setText(row.querySelector(".headline"), cell.headline ? cell.headline.text : "");
      if (cell.reason_code) st.dataset.reason = cell.reason_code;
      else delete st.dataset.reason;
      // a group's shared time on its first row only; the rows after it point up to it
      var time = row.querySelector(".time-text"), first = cell.group_first !== false;
      setText(time, first ? (cell.time_text || "") : "same group \u2191");
      if (time) time.classList.toggle("same-group", !first);
      var bar = row.querySelector("progress.bar");
      if (bar) {
        bar.hidden = !first || cell.progress === null || cell.progress === undefined;
        if (!bar.hidden) bar.value = cell.progress;
      }
      setText(row.querySelector(".attempts"), String(cell.attempts));
      setText(row.querySelector(".worker"), cell.worker || "");
      setText(row.querySelector(".reason-text"), cell.reason);
      renderDetails(row, cell);
      row.dataset.status = cell.status;
    });
    Object.keys(run.counts).forEach(function (status) {
      setText(root.querySelector('[data-count="' + status + '"]'), String(run.counts[status]));
    });
    if (run.finished) {
      root.dataset.finished = "true";
      setText(document.getElementById("run-state"), "Finished.");
      var links = document.getElementById("run-links");
      if (links) links.hidden = false;
      var cancel = document.getElementById("run-cancel");  // nothing left to cancel
      if (cancel) cancel.hidden = true;
    }
  }

  function poll() {
    fetch(url, {headers: {"Accept": "application/json"}, cache: "no-store",
                credentials: "same-origin"})
      .then(function (response) {
        if (!response.ok) throw new Error("status " + response.status);
        return response.json();
      })
      .then(function (run) {
        render(run);
        if (!run.finished) window.setTimeout(poll, INTERVAL_MS);
      })
      .catch(function () {
        window.setTimeout(poll, INTERVAL_MS * 2);  // a hiccup: keep trying, more slowly
      });
  }

  if (root.dataset.finished !== "true") window.setTimeout(poll, INTERVAL_MS);
})();
