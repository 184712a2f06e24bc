"""Errors an operator can read: an unhandled exception in a request logs its traceback to
stderr with the request id, method, path and user id, and the 500 page shows that id; a
worker's lines name their cells and runs; ``HARNESS_LOG_FORMAT=json`` gives JSON lines."""

from __future__ import annotations

import io
import json
import logging
import re
from contextlib import contextmanager

import pytest
from django.test import Client, override_settings

from webapp import logs


@pytest.fixture
def alice(db):
    from django.contrib.auth.models import User

    return User.objects.create_user("alice", password="pw-alice-1")


@contextmanager
def stderr_lines():
    """What the configured stderr handler writes, while the block runs."""
    handler = next(h for h in logging.getLogger().handlers
                   if any(isinstance(f, logs.RequestContext) for f in h.filters))
    out = io.StringIO()
    old = handler.setStream(out)
    try:
        yield out
    finally:
        handler.setStream(old)


@pytest.mark.django_db
@override_settings(ROOT_URLCONF="tests.web.boom_urls")
def test_an_unhandled_error_is_logged_with_its_request_and_the_page_shows_its_id(alice):
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    with stderr_lines() as out:
        page = client.get("/boom/")
    assert page.status_code == 500
    request_id = page["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{16}", request_id)
    assert request_id in page.content.decode()  # quoted to the operator
    log = out.getvalue()
    assert f"[request {request_id} GET /boom/ user {alice.pk}]" in log
    assert "Traceback (most recent call last)" in log
    assert "RuntimeError: the database cluster speaks SQL_ASCII" in log


@pytest.mark.django_db
def test_a_proxys_request_id_is_kept_only_when_it_is_plain():
    assert Client().get("/api/", HTTP_X_REQUEST_ID="lb-42.a_b")["X-Request-ID"] == "lb-42.a_b"
    forged = Client().get("/api/", HTTP_X_REQUEST_ID="x] user 1 [evil")["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{16}", forged)  # a new id: nothing forged reaches the log


def test_json_lines_carry_the_request_the_worker_context_and_the_traceback():
    handler = logging.StreamHandler(io.StringIO())
    config = logs.config("json")
    handler.setFormatter(logs.JsonFormatter())
    handler.addFilter(logs.RequestContext())
    handler.addFilter(logs.WorkerContext())
    log = logging.getLogger("tests.json")
    log.addHandler(handler)
    try:
        try:
            raise ValueError("lost")
        except ValueError:
            log.error("cell failed", exc_info=True, extra={"cells": [7, 8], "runs": [3]})
    finally:
        log.removeHandler(handler)
    line = json.loads(handler.stream.getvalue())
    assert line["message"] == "cell failed" and line["level"] == "ERROR"
    assert line["cells"] == [7, 8] and line["runs"] == [3] and line["request_id"] == "-"
    assert "ValueError: lost" in line["traceback"]
    assert config["formatters"]["harness"] == {"()": "webapp.logs.JsonFormatter"}


def test_a_worker_text_line_names_its_cells_and_runs():
    formatter = logging.Formatter(logs.TEXT)
    record = logging.LogRecord("tasks", logging.ERROR, "", 0, "group failed", (), None)
    record.cells, record.runs = [7, 8], []
    for f in (logs.RequestContext(), logs.WorkerContext()):
        f.filter(record)
    assert formatter.format(record).endswith("group failed (cells 7,8; runs none)")


@pytest.mark.parametrize("fmt, level, words", [
    ("xml", "INFO", "HARNESS_LOG_FORMAT='xml': use one of text, json"),
    ("text", "LOUD", "HARNESS_LOG_LEVEL='LOUD'")])
def test_a_bad_log_setting_is_a_clear_error(fmt, level, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        logs.config(fmt, level)


@pytest.mark.django_db
def test_where_finds_the_cells_and_runs_of_a_group(alice):
    from harness.storage.models import Cell, Objective, ObjectiveVersion, Submission
    from tasks.tasks import where
    from webapp.execution.groups import QueuedGroup

    objective = Objective.objects.create(slug="x", name="x")
    version = ObjectiveVersion.objects.create(objective=objective, key="k", code="",
                                              label="x")
    cells = [Cell.objects.create(version=version, suite="noisy-labels", suite_version="1.0",
                                 variant="clean", variant_hash="h", seed=s) for s in (0, 1)]
    run = Submission.objects.create(owner=alice, version=version, suites=["noisy-labels"])
    run.cells.add(*cells)
    group = QueuedGroup(version.id, "noisy-labels", "1.0", ("clean",), (0, 1))
    assert where(group) == {"cells": sorted(c.id for c in cells), "runs": [run.id]}
