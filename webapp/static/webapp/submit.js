// The submit form: validation can take half a minute (the first sandbox check after the
// server starts), so say that it is running and send the form once, not once per click.
(function () {
  "use strict";
  var form = document.querySelector("form.submit-form");
  if (!form) return;
  var button = form.querySelector("button.primary");
  var note = document.getElementById("submit-status");
  var label = button.textContent;
  var sent = false;
  form.addEventListener("submit", function (event) {
    if (sent) {
      event.preventDefault();
      return;
    }
    sent = true;
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    button.textContent = "Validating\u2026";
    if (note) note.hidden = false;
  });
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) return;  // back to a page kept in memory: it can be sent again
    sent = false;
    button.disabled = false;
    button.removeAttribute("aria-busy");
    button.textContent = label;
    if (note) note.hidden = true;
  });
})();
