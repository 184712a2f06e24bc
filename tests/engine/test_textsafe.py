"""Untrusted text shown with its control characters escaped: the function, the run status
page (server-rendered and as status.js updates it) and the submission form; JSON keeps the
raw text. The CLI's side is in tests/sandbox/test_cli_sandbox.py."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from harness.report.textsafe import printable, storable

ROOT = Path(__file__).resolve().parents[2]

# Known answers: what an objective prints, and what the operator must see instead.
ESC = "\x1b[2J\x1b[31mred\x1b[0m"  # clear the screen, colour
ESC_SHOWN = "\\x1b[2J\\x1b[31mred\\x1b[0m"
CR_TRICK = "status: killed\rstatus: ok    "  # a terminal would show only "status: ok"
CR_SHOWN = "status: killed\\x0dstatus: ok    "
BIDI = "access = \u202e\u2066 # check\u2069 \u2066if admin\u2069"  # Trojan Source
BIDI_SHOWN = "access = \\u202e\\u2066 # check\\u2069 \\u2066if admin\\u2069"
TITLE = "\x1b]0;pwned\x07"  # OSC: retitle the terminal, ended by BEL
TITLE_SHOWN = "\\x1b]0;pwned\\x07"
RAW = f"{ESC}\n{CR_TRICK}\n{BIDI}\t{TITLE}"
SHOWN = f"{ESC_SHOWN}\n{CR_SHOWN}\n{BIDI_SHOWN}\t{TITLE_SHOWN}"
RAW_CONTROLS = ("\x1b", "\r", "\x07", "\u202e", "\u2066", "\u2069")


@pytest.mark.parametrize(("raw", "shown"), [
    (ESC, ESC_SHOWN), (CR_TRICK, CR_SHOWN), (BIDI, BIDI_SHOWN), (TITLE, TITLE_SHOWN),
    (RAW, SHOWN),
    ("back\bspace\x7fdel", "back\\x08space\\x7fdel"),
    ("c1 \x9b31m csi \x85 nel", "c1 \\x9b31m csi \\x85 nel"),  # 8-bit CSI, NEL
    ("nul\x00 vt\x0b ff\x0c", "nul\\x00 vt\\x0b ff\\x0c"),
    ("\u202a\u202b\u202c\u202d\u2067\u2068", "\\u202a\\u202b\\u202c\\u202d\\u2067\\u2068"),
    ("lone \udcff surrogate", "lone \\udcff surrogate"),
])
def test_printable_escapes_controls(raw, shown):
    assert printable(raw) == shown
    assert not any(c in printable(raw) for c in RAW_CONTROLS)
    printable(raw).encode("utf-8")  # printable, and storable, whatever came in


def test_printable_keeps_ordinary_text():
    text = ("Traceback (most recent call last):\n\tFile \"loss.py\", line 3\n"
            "naïve 温度 ✓ 😀 \u200b ‘quotes’ C:\\path\\x1b stays as typed\n")
    assert printable(text) == text
    assert printable("") == "" and printable(None) == ""


# --- the web app ---------------------------------------------------------------------


@pytest.fixture
def failed_cell(db):
    """A private submission of alice's whose one cell failed with hostile output."""
    from django.contrib.auth.models import User

    from harness.storage.models import Cell, Objective, ObjectiveVersion, Submission

    alice = User.objects.create_user("alice", password="correct-horse-1")
    objective = Objective.objects.create(slug="tricky", name="tricky", owner=alice,
                                         visibility="private")
    version = ObjectiveVersion.objects.create(objective=objective, code="# code",
                                              code_sha256="0" * 64, key="k" * 64,
                                              label="tricky")
    cell = Cell.objects.create(version=version, suite="fake", suite_version="1", variant="v",
                               variant_hash="h", seed=0, status=Cell.FAILED,
                               reason="objective", attempts=1,
                               error=f"RuntimeError: {CR_TRICK}\n{BIDI}",
                               captured=RAW)
    submission = Submission.objects.create(owner=alice, version=version, suites=["fake"],
                                           seeds=1)
    submission.cells.add(cell)
    return alice, submission


def _pre(html: str, cls: str) -> str:
    start = html.index(f'class="{cls}"')
    return html[html.index(">", start) + 1:html.index("</pre>", start)]


def test_run_status_page_shows_control_characters_escaped(client, failed_cell):
    from django.utils.html import escape

    alice, submission = failed_cell
    client.force_login(alice)
    html = client.get(f"/runs/{submission.pk}/").content.decode()
    assert _pre(html, "cell-output") == escape(SHOWN)
    assert _pre(html, "cell-error") == escape(f"RuntimeError: {CR_SHOWN}\n{BIDI_SHOWN}")
    assert not any(c in html for c in RAW_CONTROLS)
    # status.json keeps the raw text (a client decides how to show it; status.js escapes)
    cell = client.get(f"/runs/{submission.pk}/status.json").json()["cells"][0]
    assert cell["captured"] == RAW
    assert cell["error"] == f"RuntimeError: {CR_TRICK}\n{BIDI}"


def test_template_filter_escapes_and_keeps_autoescaping():
    from django.template import engines

    template = engines["django"].from_string("{% load textsafe %}<pre>{{ text|printable }}</pre>")
    assert template.render({"text": f"<b>{ESC}</b>"}) == \
        f"<pre>&lt;b&gt;{ESC_SHOWN}&lt;/b&gt;</pre>"
    assert template.render({"text": None}) == "<pre></pre>"


def test_submission_form_shows_validator_messages_escaped(client, db, monkeypatch):
    """A validator message quotes the objective (its exception's text): escaped on the form."""
    from django.contrib.auth.models import User

    import harness.sandbox
    from harness.objectives.validate import Problem, Validation

    def validate_sandboxed(code, filename, overrides=None):
        return Validation(filename, problems=[
            Problem("import", "error", f"my_loss.py raised ValueError while loading: {BIDI}"),
            Problem("vmap", "warning", f"warning text {ESC}")])

    monkeypatch.setattr(harness.sandbox, "validate_sandboxed", validate_sandboxed)
    client.force_login(User.objects.create_user("alice", password="correct-horse-1"))
    html = client.post("/submit/", {
        "name": "my loss", "description": "", "paper_url": "", "code_text": "x = 1\n",
        "visibility": "public", "hyperparameters": "", "seeds": 1}).content.decode()
    assert f"while loading: {BIDI_SHOWN}" in html
    assert f"warning text {ESC_SHOWN}" in html
    assert not any(c in html for c in RAW_CONTROLS)


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium")
def test_status_js_escapes_what_it_writes_into_the_page():
    """The page updates itself from status.json's raw text: status.js escapes it as the
    server's filter does (same known answers), emoji and text left alone."""
    pytest.importorskip("playwright")
    from playwright.sync_api import sync_playwright

    script = (ROOT / "webapp" / "static" / "webapp" / "status.js").read_text()
    page_html = """<!doctype html><meta charset="utf-8">
      <div id="run-status" data-status-url="/status.json" data-finished="false">
        <span id="run-state"></span><p id="run-links" hidden></p>
        <table><tr data-cell="1"><td><span class="st"></span></td><td class="headline"></td>
          <td class="attempts"></td><td class="worker"></td>
          <td><div class="reason-text"></div><details class="cell-details" hidden>
            <pre class="cell-error" hidden></pre><pre class="cell-output" hidden></pre>
          </details></td></tr></table>
      </div><script src="/status.js"></script>"""
    state = {"finished": True, "counts": {"failed": 1}, "cells": [{
        "id": 1, "status": "failed", "label": "failed", "reason": "failed", "reason_code":
        "objective", "attempts": 1, "worker": None, "headline": None,
        "error": f"RuntimeError: {CR_TRICK} 😀", "captured": RAW}]}
    bodies = {"/run": ("text/html", page_html), "/status.js": ("text/javascript", script),
              "/status.json": ("application/json", json.dumps(state))}

    def serve(route):
        path = "/" + route.request.url.split("/", 3)[3]
        kind, body = bodies[path]
        route.fulfill(status=200, content_type=kind, body=body)

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            page = browser.new_page()
            page.route("http://harness.test/**", serve)
            page.goto("http://harness.test/run")
            page.wait_for_selector(".cell-output:not([hidden])", state="attached")
            output = page.text_content(".cell-output")
            error = page.text_content(".cell-error")
        finally:
            browser.close()
    assert output == SHOWN
    assert error == f"RuntimeError: {CR_SHOWN} 😀"


def test_storable_escapes_only_what_a_database_refuses():
    assert storable("a\x00b\udcffc\x1b[2J\n\u202e") == "a\\x00b\\udcffc\x1b[2J\n\u202e"
    assert storable(None) == "" and storable("plain ünïcode ✓") == "plain ünïcode ✓"
