"""Cancel and requeue a run (issue 35, staff tools), each recorded with who, when, why:
a cancelled cell a worker is still training stores nothing when that worker finishes."""

from __future__ import annotations

import json

import pytest

from harness.contract.suite import CellResult
from harness.storage import store
from harness.storage.models import Cell, ModerationAction, Submission
from tests.workers.test_tasks import SHORT, make_cells, sent, version  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(version, django_user_model):  # noqa: F811
    owner = django_user_model.objects.create_user("owner", password="pw-owner-123")
    cells = make_cells(version, variants=("clean", "sym-0.4"), seeds=(0, 1))
    submission = Submission.objects.create(owner=owner, version=version,
                                           suites=["noisy-labels"])
    submission.cells.set(cells)
    return submission, cells


def test_the_owner_cancels_and_a_running_cells_late_result_is_not_stored(
        run, client, django_user_model):
    from harness.contract.registry import suite_at

    submission, cells = run
    claim = store.claim([c.pk for c in cells[:1]], worker="cpu@worker")  # one cell is running
    assert claim
    cells[3].status = Cell.OK  # one finished already: left as it is
    cells[3].save()
    stranger = django_user_model.objects.create_user("stranger")
    client.force_login(stranger)
    assert client.post(f"/runs/{submission.pk}/cancel/").status_code == 403
    client.force_login(submission.owner)
    page = client.get(f"/runs/{submission.pk}/").content.decode()
    assert 'id="run-cancel"' in page and 'id="run-requeue"' not in page
    answer = client.post(f"/runs/{submission.pk}/cancel/", {"reason": "wrong loss file"})
    assert answer.status_code == 302
    states = dict(Cell.objects.filter(pk__in=[c.pk for c in cells])
                  .values_list("pk", "status"))
    assert [states[c.pk] for c in cells] == ["killed", "killed", "killed", "ok"]
    assert set(Cell.objects.filter(status="killed").values_list("reason", flat=True)) == {
        "cancelled"}
    (action,) = ModerationAction.objects.all()
    assert (action.actor, action.action, action.cells, action.reason) == (
        submission.owner, "cancel", 3, "wrong loss file")
    page = client.get(f"/runs/{submission.pk}/").content.decode()
    assert "cancelled (3 cells stopped) by owner: wrong loss file" in page
    # the worker that was training the first cell finishes: nothing is written
    suite = suite_at("noisy-labels", SHORT)
    stored = store.store_results(submission.version, suite, [CellResult(
        "clean", 0, "ok", {"test_acc": 0.9})], {}, claim=claim)
    assert stored == 0 and Cell.objects.get(pk=cells[0].pk).status == "killed"


def test_staff_requeue_the_failed_cells_and_only_staff_may(
        run, client, sent, django_user_model, settings,  # noqa: F811
        django_capture_on_commit_callbacks):
    settings.HARNESS_EXECUTOR = "tasks.dispatch:enqueue"
    submission, cells = run
    Cell.objects.filter(pk__in=[c.pk for c in cells]).update(
        status=Cell.FAILED, reason="infrastructure", error="lost worker")
    client.force_login(submission.owner)
    assert client.post(f"/runs/{submission.pk}/requeue/").status_code == 403
    client.force_login(django_user_model.objects.create_user("op", is_staff=True))
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(f"/runs/{submission.pk}/requeue/", {"reason": "broker outage"})
    assert answer.status_code == 302
    fresh = Cell.objects.filter(pk__in=[c.pk for c in cells])
    assert set(fresh.values_list("status", flat=True)) == {"queued"}
    assert set(fresh.values_list("error", flat=True)) == {""}
    assert len(sent) == 2  # the two variants' groups, sent once the transaction committed
    (action,) = ModerationAction.objects.all()
    assert (action.action, action.cells, action.reason) == ("requeue", 4, "broker outage")


def test_staff_hide_an_objective_from_every_board_and_its_owner_sees_why(
        client, django_user_model):
    from harness.contract.registry import get_suite
    from tests.web.test_leaderboard import make_objective
    from webapp import leaderboard

    ranked = get_suite("noisy-labels").ranked_variants
    owner = django_user_model.objects.create_user("author")
    make_objective("ce", {v: [0.8] * 5 for v in ranked})
    mine = make_objective("sneaky", {v: [0.95] * 5 for v in ranked}, builtin=False,
                          owner=owner).objective
    labels = lambda: {r["objective"] for r in leaderboard.home_table()["rows"]}  # noqa: E731
    assert labels() == {"ce", "sneaky"}  # cached now
    staff = django_user_model.objects.create_user("op", is_staff=True, is_superuser=True)
    client.force_login(staff)
    form = client.get(f"/admin/webapp/objective/{mine.pk}/change/").content.decode()
    assert 'name="hide"' in form
    data = {"description": "", "paper_url": "", "visibility": "public", "hide": "on", "why": ""}
    refused = client.post(f"/admin/webapp/objective/{mine.pk}/change/", data)
    assert refused.status_code == 200 and "Say why" in refused.content.decode()
    done = client.post(f"/admin/webapp/objective/{mine.pk}/change/",
                       {**data, "why": "fits the public test split"})
    assert done.status_code == 302
    assert labels() == {"ce"}  # the cached board rebuilt without it
    assert "sneaky" not in client.get("/export/noisy-labels/csv").content.decode()
    assert "sneaky" not in json.dumps(client.get("/api/objectives").json())
    client.logout()
    assert client.get("/objectives/sneaky/").status_code == 404
    client.force_login(owner)
    page = client.get("/objectives/sneaky/").content.decode()
    assert "Hidden by staff" in page and "fits the public test split" in page
    (action,) = ModerationAction.objects.filter(objective=mine)
    assert (action.actor, action.action) == (staff, "hide")
    client.force_login(staff)
    client.post(f"/admin/webapp/objective/{mine.pk}/change/", {**data, "hide": ""})
    assert labels() == {"ce", "sneaky"}
    assert [a.action for a in ModerationAction.objects.filter(objective=mine)] == [
        "hide", "unhide"]
