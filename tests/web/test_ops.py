"""The operator's snapshot (issue 35, staff tools): /ops/ for staff and `manage.py ops`
print the same workers, queues and last-24-hours counts, read from the cells."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from harness.storage.models import Cell
from tests.web.test_leaderboard import make_objective
from webapp.ops import snapshot

pytestmark = pytest.mark.django_db


def _cell(version, seed, **fields):
    return Cell.objects.create(version=version, suite="noisy-labels", suite_version="1.0",
                               variant="clean", seed=seed, **fields)


def test_ops_counts_workers_queues_states_and_failures(client, django_user_model, capsys):
    now = timezone.now()
    version = make_objective("probe", {}, builtin=False)
    _cell(version, 10, status="running", worker="cpu@a", heartbeat_at=now - timedelta(seconds=5))
    _cell(version, 11, status="ok", worker="cpu@b", heartbeat_at=now - timedelta(hours=2),
          finished_at=now - timedelta(hours=2))
    _cell(version, 12, status="failed", reason="infrastructure", worker="cpu@b",
          finished_at=now - timedelta(hours=1))
    _cell(version, 13, status="failed", reason="objective", finished_at=now - timedelta(hours=1))
    _cell(version, 14, status="ok", worker="cpu@old", finished_at=now - timedelta(days=3))
    _cell(version, 15, status="queued", enqueued_at=now - timedelta(minutes=10))
    _cell(version, 16, status="queued")  # not sent yet
    snap = snapshot(now)
    assert [(w["worker"], w["running"]) for w in snap["workers"]] == [("cpu@a", 1), ("cpu@b", 0)]
    assert snap["workers"][0]["seconds_ago"] == 5.0
    cpu = next(q for q in snap["queues"] if q["queue"] == "cpu")
    assert cpu["queued"] == 2 and cpu["oldest_sent_seconds_ago"] == 600.0
    assert snap["finished_24h"] == {"failed": 2, "ok": 1} and snap["running"] == 1
    assert snap["failures_24h"] == {"infrastructure": 1, "objective": 1}
    # the command prints the same, as text or JSON
    call_command("ops", "--json")
    assert json.loads(capsys.readouterr().out)["failures_24h"] == snap["failures_24h"]
    call_command("ops")
    text = capsys.readouterr().out
    assert "cpu: 2 queued, oldest sent" in text and "infrastructure: 1" in text
    # the page: staff only
    assert client.get("/ops/")["Location"].startswith("/admin/login/")
    client.force_login(django_user_model.objects.create_user("someone"))
    assert client.get("/ops/").status_code == 302
    client.force_login(django_user_model.objects.create_user("op", is_staff=True))
    page = client.get("/ops/").content.decode()
    assert "cpu@a" in page and "infrastructure: 1" in page and "cpu@old" not in page
