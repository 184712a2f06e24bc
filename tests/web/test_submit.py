"""Over 500 lines on purpose: the form's every refusal shares its users and fixtures.

Submission form, limits and safety, the local runner and the run status page.

On the real PostgreSQL of webapp/settings_test.py. Submissions train for one epoch
(HARNESS_RUN_EPOCHS=1) with the real engine: no mocks.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import path
from django.utils.html import escape

from harness.contract.registry import get_suite
from harness.objectives.loading import load_objective
from harness.objectives.validate import validate
from harness.sandbox.remote import LossServers
from harness.storage.models import Cell, Objective, ObjectiveVersion, Submission
from webapp.execution import executors
from webapp.execution import groups as work
from webapp.forms import suites_for

pytestmark = pytest.mark.django_db

CE = '''"""Scaled cross-entropy, for tests."""
import torch


def classification_loss(logits, targets, *, q: float = 1.0):
    """q * CE per sample."""
    return -q * logits.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
'''

SYNTAX_ERROR = '''import torch

def classification_loss(logits, targets)
    return logits.sum()
'''

WRONG_SIGNATURE = '''import torch

def classification_loss(logits):
    return logits.logsumexp(-1)
'''

NAN_OUTPUT = '''import torch

def classification_loss(logits, targets):
    return logits.sum() * float("nan")
'''

# Passes the validator (batches of 8) and raises on the training batches (64).
RAISES_AT_RUNTIME = '''"""Fails once training starts."""
import torch


def classification_loss(logits, targets):
    if targets.shape[-1] > 8:
        print("PRINTED-OUTPUT-MARKER-2c1")
        raise RuntimeError("boom-at-runtime PRIVATE-MARKER-7f3a")
    return -logits.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
'''

# Holds every training step until the gate file exists, so a test can watch "running".
VARIANTS = 7  # noisy-labels' default (public, embedded) variants


@pytest.fixture(autouse=True)
def _runner(settings):
    settings.HARNESS_EXECUTOR = "none"  # tests that run cells choose a runner explicitly
    settings.HARNESS_RUN_EPOCHS = 1


@pytest.fixture
def alice(db) -> User:
    return User.objects.create_user("alice", password="correct-horse-1")


@pytest.fixture
def bob(db) -> User:
    return User.objects.create_user("bob", password="correct-horse-2")


@pytest.fixture
def client_a(alice) -> Client:
    c = Client()
    c.force_login(alice)
    return c


@pytest.fixture
def client_b(bob) -> Client:
    c = Client()
    c.force_login(bob)
    return c


def form_data(code: str = CE, **fields) -> dict:
    data = {"name": "my loss", "description": "", "paper_url": "", "code_text": code,
            "visibility": "public", "hyperparameters": "", "suites": ["noisy-labels"],
            "seeds": 2}
    data.update(fields)
    return data


def submit(client: Client, code: str = CE, **fields):
    return client.post("/submit/", form_data(code, **fields))


def upload(client: Client, content: bytes, filename: str = "my_loss.py", **fields):
    data = form_data("", **fields)
    data["code_file"] = SimpleUploadedFile(filename, content, content_type="text/x-python")
    return client.post("/submit/", data)


def nothing_created() -> bool:
    return not (Objective.objects.exists() or ObjectiveVersion.objects.exists()
                or Submission.objects.exists() or Cell.objects.exists())


def code_errors(response) -> str:
    """The HTML of the error block next to the code field."""
    html = response.content.decode()
    start = html.index('id="code-errors"')
    return html[start:html.index("</fieldset>", start)]


def status(client: Client, submission: Submission) -> dict:
    response = client.get(f"/runs/{submission.pk}/status.json")
    assert response.status_code == 200
    return response.json()


def wait_for(client: Client, submission: Submission, done, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state = status(client, submission)
        if done(state) or time.monotonic() > deadline:
            return state
        time.sleep(0.05)


# --- access ---------------------------------------------------------------------------


def test_submit_requires_sign_in(client):
    response = client.get("/submit/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/submit/"
    response = client.post("/submit/", form_data())
    assert response.status_code == 302 and nothing_created()


def test_form_renders_fields_and_supported_suites(client_a):
    html = client_a.get("/submit/").content.decode()
    for name in ("name", "description", "paper_url", "code_file", "code_text", "visibility",
                 "hyperparameters", "suites", "seeds"):
        assert f'name="{name}"' in html
    assert 'value="noisy-labels"' in html and 'enctype="multipart/form-data"' in html


def test_suites_for_asks_each_suite():
    names = [s.name for s in suites_for(load_objective("ce"))]
    assert "noisy-labels" in names


# --- valid submissions ----------------------------------------------------------------


def test_valid_paste_creates_objective_version_submission_and_queued_cells(client_a, alice):
    response = submit(client_a, hyperparameters="q = 0.5\n# a comment\n", visibility="private",
                      description="half CE", paper_url="https://example.org/paper")
    submission = Submission.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/runs/{submission.pk}/"
    objective = Objective.objects.get()
    assert (objective.slug, objective.name, objective.owner, objective.visibility) == (
        "my-loss", "my loss", alice, "private")
    assert objective.paper_url == "https://example.org/paper" and not objective.is_builtin
    version = ObjectiveVersion.objects.get()
    assert version.hyperparameters == {"q": 0.5} and version.label == "my-loss(q=0.5)"
    assert version.code == CE
    loaded = load_objective("ce")  # version key semantics: code hash + hyperparameters
    assert len(version.key) == 64 and version.key != loaded.version_key
    assert submission.owner == alice and submission.version == version
    assert submission.suites == ["noisy-labels"] and submission.seeds == 2
    cells = Cell.objects.all()
    assert cells.count() == VARIANTS * 2 == submission.cells.count()
    assert {c.status for c in cells} == {"queued"}
    assert {c.suite_version for c in cells} == {"1.0+e1"}
    assert sorted({c.seed for c in cells}) == [0, 1]


def test_valid_upload_creates_the_same_and_resubmitting_is_idempotent(client_a):
    response = upload(client_a, CE.encode())
    assert response.status_code == 302
    version = ObjectiveVersion.objects.get()
    assert version.code == CE and Objective.objects.get().description == (
        "Scaled cross-entropy, for tests.")
    response = submit(client_a, CE)  # same code and hyperparameters: same version and cells
    assert response.status_code == 302
    assert ObjectiveVersion.objects.count() == 1 and Submission.objects.count() == 2
    assert Cell.objects.count() == VARIANTS * 2
    first, second = Submission.objects.order_by("pk")
    assert set(first.cells.all()) == set(second.cells.all())


def test_a_name_owned_by_someone_else_is_refused(client_a, client_b):
    assert submit(client_a).status_code == 302
    response = submit(client_b)
    assert response.status_code == 200 and Submission.objects.count() == 1
    assert "already exists" in response.content.decode()
    Objective.objects.create(slug="gce", name="gce", is_builtin=True)
    response = submit(client_b, name="GCE")  # a built-in baseline's slug
    assert response.status_code == 200 and "already exists" in response.content.decode()
    assert submit(client_a, CE + "\n# v2\n").status_code == 302  # the owner adds a version
    assert ObjectiveVersion.objects.filter(objective__slug="my-loss").count() == 2


# --- broken code: the validator's exact message next to the code field ----------------


def expected_messages(code: str, tmp_path: Path) -> list[str]:
    """What the engine's validator says about ``code`` in a file named like the form's."""
    path = tmp_path / work.code_filename("my-loss")
    path.write_text(code)
    report = validate(str(path))
    assert not report.ok
    return [work.scrub_paths(p.message, tmp_path.resolve()) for p in report.problems
            if p.severity == "error"]


@pytest.mark.parametrize("code, words", [
    (SYNTAX_ERROR, "syntax error in my_loss.py at line 3"),
    (WRONG_SIGNATURE, "classification_loss must take (logits, targets)"),
    (NAN_OUTPUT, "NaN"),
], ids=["syntax", "signature", "nan"])
def test_broken_code_returns_the_validator_message_and_creates_nothing(
        client_a, tmp_path, code, words):
    response = submit(client_a, code)
    assert response.status_code == 200 and nothing_created()
    block = code_errors(response)
    messages = expected_messages(code, tmp_path)
    assert messages and any(words in m for m in messages)
    for message in messages:
        assert escape(message) in block
    assert "/tmp" not in response.content.decode()  # no server paths


def test_broken_upload_is_reported_on_the_code_field_too(client_a, tmp_path):
    response = upload(client_a, SYNTAX_ERROR.encode())
    assert response.status_code == 200 and nothing_created()
    assert escape(expected_messages(SYNTAX_ERROR, tmp_path)[0]) in code_errors(response)


def test_validator_warnings_are_shown_but_do_not_block(client_a):
    code = CE.replace("    return -q", "    if logits.sum().item() > 1e9:\n        q = 2 * q\n"
                      "    return -q")
    response = submit(client_a, code)
    assert response.status_code == 302 and Submission.objects.count() == 1
    page = client_a.get(response["Location"]).content.decode()
    assert "cannot run seed-batched (vmap)" in page


def test_fewer_seeds_than_a_suites_minimum_are_queued_with_a_warning_that_says_so(client_a):
    """1–2 seeds are accepted (a quick look), but the form says beforehand and the run page
    afterwards that they give no interval or rank."""
    assert "for an interval and a rank" in client_a.get("/submit/").content.decode()
    fewer = get_suite("noisy-labels").min_seeds - 1
    response = submit(client_a, seeds=fewer)
    assert response.status_code == 302 and Submission.objects.count() == 1
    page = client_a.get(response["Location"]).content.decode()
    assert f"are fewer than noisy-labels (at least {fewer + 1})" in page
    assert "provisional, unranked" in page


def test_unknown_hyperparameter_is_reported_on_its_field(client_a):
    response = submit(client_a, hyperparameters="r=2")
    assert response.status_code == 200 and nothing_created()
    assert "unknown hyperparameter &#x27;r&#x27; (this objective has: q)" in (
        response.content.decode())
    response = submit(client_a, hyperparameters="just words")
    assert "Line 1: expected key=value" in response.content.decode() and nothing_created()


def test_exactly_one_of_upload_and_paste(client_a):
    response = submit(client_a, "")
    assert "exactly one" in code_errors(response) and nothing_created()
    data = form_data(CE)
    data["code_file"] = SimpleUploadedFile("my_loss.py", CE.encode())
    response = client_a.post("/submit/", data)
    assert "exactly one" in code_errors(response) and nothing_created()


def test_a_hyperparameter_set_twice_is_refused_not_last_wins(client_a):
    response = submit(client_a, hyperparameters="q=0.5\nq=0.7")
    assert response.status_code == 200 and nothing_created()
    assert "hyperparameter &#x27;q&#x27; is set twice" in response.content.decode()


@pytest.mark.parametrize("name", ["gce\u202eexe.py", "two\nlines", "bell\x07", "x\u2066y"])
def test_a_name_with_control_or_direction_characters_is_refused(client_a, name):
    response = submit(client_a, name=name)
    assert response.status_code == 200 and nothing_created()
    assert "control or text-direction characters" in response.content.decode()


@pytest.fixture
def csrf_client(alice) -> tuple[Client, str]:
    """A browser's client: the CSRF check enforced, the token taken from the form."""
    c = Client(enforce_csrf_checks=True)
    c.force_login(alice)
    html = c.get("/submit/").content.decode()
    return c, html.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]


def test_a_paste_of_megabytes_gets_the_forms_own_answer_under_real_csrf(csrf_client):
    """A 2 MB paste was a bare "Bad Request (400)" that lost the form: the CSRF check read
    the body first and hit Django's ceiling. Now it is parsed, and the form names its size
    and keeps the other fields; without the token the same post is still refused."""
    c, token = csrf_client
    data = form_data(CE + "#" * (2 * 2 ** 20) + "\n", name="my big loss")
    assert c.post("/submit/", data).status_code == 403
    response = c.post("/submit/", {**data, "csrfmiddlewaretoken": token})
    assert response.status_code == 200 and nothing_created()
    assert "The code is 2.0\xa0MB; the limit is 64.0\xa0KB." in code_errors(response)
    assert 'value="my big loss"' in response.content.decode()


def test_a_body_over_the_servers_ceiling_gets_the_form_with_the_limits(csrf_client):
    """Over DATA_UPLOAD_MAX_MEMORY_SIZE nothing is parsed: the form again, with both
    limits, answered before the CSRF check (nothing is done with the request)."""
    c, _ = csrf_client
    response = c.post("/submit/", form_data(CE + "#" * (9 * 2 ** 20) + "\n"))
    assert response.status_code == 413 and nothing_created()
    html = response.content.decode()
    assert "larger than the server accepts (8 MB)" in html and "at most 64 KB" in html
    assert 'name="code_text"' in html  # the form, to try again


def test_a_bad_request_has_a_page_in_words(client):
    """Django's own 400s (here a Host header no setting allows) have a page, not a bare line."""
    response = client.get("/", HTTP_HOST="not-this-server.invalid")
    assert response.status_code == 400
    assert "could not read this request" in response.content.decode()


def test_seeds_are_bounded(client_a):
    for seeds in (0, 11):
        response = submit(client_a, seeds=seeds)
        assert response.status_code == 200 and nothing_created()


# --- limits -----------------------------------------------------------------------------


def test_oversize_upload_and_paste_are_refused(client_a, settings):
    settings.MAX_OBJECTIVE_BYTES = 200
    big = CE + "#" * 300 + "\n"
    response = upload(client_a, big.encode())
    assert response.status_code == 200 and nothing_created()
    assert "the limit is 200\xa0bytes" in code_errors(response)
    response = submit(client_a, big)
    assert "the limit is 200\xa0bytes" in code_errors(response) and nothing_created()


def test_non_utf8_upload_is_refused_with_a_clear_error(client_a):
    response = upload(client_a, CE.replace("Scaled", "Sc\xe1led").encode("latin-1"))
    assert response.status_code == 200 and nothing_created()
    assert "not UTF-8 text (invalid byte 0xe1" in code_errors(response)


def test_non_python_upload_is_refused(client_a):
    response = upload(client_a, CE.encode(), filename="loss.txt")
    assert "Upload a Python source file (.py)." in code_errors(response) and nothing_created()


def test_per_user_cap_on_queued_cells(client_a, client_b, settings):
    settings.MAX_QUEUED_CELLS_PER_USER = 20
    response = submit(client_a, seeds=3)  # 21 cells
    assert response.status_code == 200 and nothing_created()
    assert "would queue 21 cells" in response.content.decode()
    assert submit(client_a, seeds=2).status_code == 302  # 14 cells, left queued
    response = submit(client_a, CE + "\n# v2\n", seeds=1)  # 7 more: 21 > 20
    assert response.status_code == 200 and "already have 14 queued" in response.content.decode()
    assert Submission.objects.count() == 1 and Cell.objects.count() == 14
    assert submit(client_b, name="bob loss", seeds=2).status_code == 302  # a cap per user
    Cell.objects.update(status=Cell.OK)  # finished cells no longer count
    assert submit(client_a, CE + "\n# v2\n", seeds=1).status_code == 302


def test_tuned_opt_in_queues_the_tuned_tracks_final_cells_and_counts_its_search(
        client_a, settings):
    form = client_a.get("/submit/").content.decode()
    assert "Also tune at equal budget" in form
    assert "noisy-labels: 8 trials × 5 search seeds" in form and "about 9×" in form  # its cost
    settings.MAX_QUEUED_CELLS_PER_USER = 100
    # 7 variants × 2 seeds at defaults, the same tuned, and 7 × 8 × 5 search cells: 308
    response = submit(client_a, seeds=2, tuned="on")
    assert response.status_code == 200 and nothing_created()
    assert "would queue 308 cells" in response.content.decode()
    settings.MAX_QUEUED_CELLS_PER_USER = 400
    assert submit(client_a, seeds=2, tuned="on").status_code == 302
    versions = sorted(Cell.objects.values_list("suite_version", flat=True).distinct())
    assert versions == ["1.0+e1", "1.0+e1+tuned8"]  # the search cells come with the run
    assert Cell.objects.filter(suite_version="1.0+e1+tuned8").count() == VARIANTS * 2
    submission = Submission.objects.get()
    assert submission.cells.count() == VARIANTS * 4
    state = status(client_a, submission)
    assert state["tuned"] == ["noisy-labels"] and submission.suites == ["noisy-labels"]
    assert sum(c["tuned"] for c in state["cells"]) == VARIANTS * 2


def test_tuned_opt_in_without_a_tunable_suite_says_which_have_one(client_a, monkeypatch):
    monkeypatch.setenv("HARNESS_SUITES", "tests.fake_suite")  # the one suite without one
    squared = "def regression_loss(pred, target):\n    return (pred - target) ** 2\n"
    response = submit(client_a, squared, suites=["fake-regression"], tuned="on")
    assert response.status_code == 200 and nothing_created()
    assert "None of the chosen suites has a tuned protocol" in response.content.decode()
    assert ("noisy-labels, certified, calibration, tta, unlearning-tofu, unlearning-muse"
            in response.content.decode())
    # a post-hoc calibrator trains nothing: there is nothing to tune
    identity = ("def posthoc_calibration(val_logits, val_targets, test_logits):\n"
                "    return test_logits.softmax(-1)\n")
    response = submit(client_a, identity, suites=["calibration"], tuned="on")
    assert response.status_code == 200 and nothing_created()
    assert "tunes training objectives" in response.content.decode()
    # a value set for what the track tunes would be dropped by every trial: said, not done
    tuned_q = "SEARCH_SPACE = {'q': {'low': 0.5, 'high': 2.0}}\n" + CE
    response = submit(client_a, tuned_q, hyperparameters="q=0.7", tuned="on")
    assert response.status_code == 200 and nothing_created()
    assert "q: the tuned track tunes this" in response.content.decode()


def test_csrf_token_is_required(alice):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post("/submit/", form_data()).status_code == 403
    assert nothing_created()
    assert strict.post("/accounts/logout/").status_code == 403
    page = strict.get("/submit/")
    token = page.cookies["csrftoken"].value
    response = strict.post("/submit/", {**form_data(), "csrfmiddlewaretoken": token})
    assert response.status_code == 302


# --- running: status page and status.json ---------------------------------------------


def test_status_json_shape_and_the_page(client_a, client):
    submit(client_a, seeds=1)
    submission = Submission.objects.get()
    state = status(client_a, submission)
    assert set(state) == {"submission", "objective", "is_owner", "finished", "total", "counts",
                          "suites", "cells", "tuned"}
    assert state["submission"] == submission.pk and state["is_owner"] is True
    assert state["objective"] == {"name": "my loss", "slug": "my-loss", "label": "my-loss",
                                  "url": "/objectives/my-loss/"}
    assert state["finished"] is False and state["total"] == VARIANTS
    assert state["counts"] == {"queued": VARIANTS, "running": 0, "ok": 0, "diverged": 0,
                               "failed": 0, "timeout": 0, "killed": 0}
    assert state["suites"] == [{"name": "noisy-labels", "url": "/suites/noisy-labels/"}]
    cell = state["cells"][0]
    assert set(cell) == {"id", "suite", "suite_version", "variant", "seed", "status", "label",
                         "reason", "reason_code", "attempts", "worker", "error", "captured",
                         "has_details", "headline", "wall_time", "progress", "eta_seconds",
                         "group_members", "group_seconds", "time_text", "group_first",
                         "tuned"}
    assert (cell["suite"], cell["status"], cell["label"], cell["headline"]) == (
        "noisy-labels", "queued", "queued", None)
    assert (cell["attempts"], cell["worker"], cell["reason_code"], cell["error"]) == (
        0, None, None, None)
    html = client.get(f"/runs/{submission.pk}/").content.decode()  # public, even anonymous
    assert f'data-status-url="/runs/{submission.pk}/status.json"' in html
    assert "webapp/status.js" in html and html.count("<tr data-cell=") == VARIANTS
    assert 'id="run-links" hidden' in html
    assert 'id="profile-link"' in html and 'href="/objectives/my-loss/#profile"' in html
    assert status(client, submission)["is_owner"] is False


def test_the_objective_page_links_to_its_runs_while_they_run(client_a, client):
    """A run was hard to find again: its objective page said only "No finished results
    yet". It links every run with cells queued or running, for anyone (run pages are
    public), and stops once they have finished."""
    submit(client_a, seeds=1)
    submission = Submission.objects.get()
    html = client.get("/objectives/my-loss/").content.decode()
    assert f'href="/runs/{submission.pk}/">Run #{submission.pk}</a>: {VARIANTS} of its ' \
           f"{VARIANTS} cells queued or running" in html
    home = client.get("/").content.decode()  # on the board before its first cell lands
    assert (f'<a href="/objectives/my-loss/">my loss</a>: <a href="/runs/{submission.pk}/">'
            f"run #{submission.pk}</a>, {VARIANTS} of its {VARIANTS} cells") in home
    submission.cells.update(status="ok")
    assert "runs-in-progress" not in client.get("/objectives/my-loss/").content.decode()
    assert "runs-on-board" not in client.get("/").content.decode()
    submit(client_a, seeds=1, name="hidden loss", visibility="private")
    assert "hidden loss" not in client.get("/").content.decode()  # private: nobody else's


def test_a_groups_time_is_shown_once_on_its_first_row(client_a):
    """A worker claims a group's cells together: its progress and time left are one fact,
    shown on the group's first row, not repeated on each of its cells."""
    from django.utils import timezone

    submit(client_a, seeds=1)
    submission = Submission.objects.get()
    started = timezone.now() - timezone.timedelta(minutes=3)
    submission.cells.update(status="running", worker="cpu@box", started_at=started,
                            progress=0.25, attempts=1)
    cells = status(client_a, submission)["cells"]
    assert [c["group_first"] for c in cells] == [True] + [False] * (VARIANTS - 1)
    assert all(c["time_text"] == "25% of its group · about 9 min left" for c in cells)
    html = client_a.get(f"/runs/{submission.pk}/").content.decode()
    assert html.count("of its group · about") == 1
    assert html.count("same group ↑") == VARIANTS - 1


def test_inline_runner_takes_cells_to_ok_with_metrics(client_a, settings,
                                                      django_capture_on_commit_callbacks):
    settings.HARNESS_EXECUTOR = "inline"
    with django_capture_on_commit_callbacks(execute=True):
        submit(client_a, seeds=1)
    submission = Submission.objects.get()
    state = status(client_a, submission)
    assert state["finished"] is True and state["counts"]["ok"] == VARIANTS
    assert all(c["label"] == "done" and c["headline"]["metric"] == "test_acc"
               and c["headline"]["text"].endswith("%") for c in state["cells"])
    cell = submission.cells.first()
    assert cell.started_at is not None and cell.finished_at >= cell.started_at
    assert cell.metrics.filter(name="test_acc").exists() and cell.attempts == 1
    html = client_a.get(f"/runs/{submission.pk}/").content.decode()
    assert 'id="run-links" hidden' not in html and 'href="/objectives/my-loss/"' in html
    assert 'href="/suites/noisy-labels/"' in html
    account = client_a.get("/accounts/").content.decode()  # the run and the profile it fills
    assert f'href="/runs/{submission.pk}/"' in account
    assert 'href="/objectives/my-loss/#profile"' in account
    assert f"{VARIANTS} / {VARIANTS}" in account


def test_failing_objective_ends_failed_with_reason_for_the_owner_only(
        client_a, client_b, client, settings, django_capture_on_commit_callbacks):
    settings.HARNESS_EXECUTOR = "inline"
    with django_capture_on_commit_callbacks(execute=True):
        submit(client_a, RAISES_AT_RUNTIME, seeds=1, visibility="private")
    submission = Submission.objects.get()
    mine = status(client_a, submission)
    assert mine["finished"] is True and mine["counts"]["failed"] == VARIANTS
    cell = mine["cells"][0]
    assert cell["reason"] == "failed while running: the objective raised an exception"
    assert (cell["reason_code"], cell["attempts"]) == ("objective", 1)
    error = cell["error"]
    assert "RuntimeError: boom-at-runtime" in error and 'File "my_loss.py"' in error
    assert "/tmp" not in error
    assert "PRINTED-OUTPUT-MARKER-2c1" in cell["captured"]  # the sandbox's captured output
    page = client_a.get(f"/runs/{submission.pk}/").content.decode()
    assert "boom-at-runtime" in page and "PRINTED-OUTPUT-MARKER-2c1" in page
    for other in (client_b, client):  # results are public; code and logs are the owner's
        theirs = status(other, submission)
        assert theirs["counts"]["failed"] == VARIANTS
        cell = theirs["cells"][0]
        assert cell["reason"].startswith("failed while running: the objective raised")
        assert "owner only" in cell["reason"] and cell["reason_code"] == "objective"
        assert cell["error"] is None and cell["captured"] is None
        for response in (other.get(f"/runs/{submission.pk}/"),
                         other.get(f"/runs/{submission.pk}/status.json")):
            text = response.content.decode()
            assert "boom-at-runtime" not in text and "PRIVATE-MARKER" not in text
            assert "PRINTED-OUTPUT-MARKER" not in text and "cell-details" not in text
            assert "Traceback" not in text and "torch" not in text


def test_private_code_is_never_served_to_others_by_these_views(client_a, client_b):
    code = CE.replace("for tests.", "for tests. SECRET-CODE-MARKER-91c")
    submit(client_a, code, visibility="private")
    submission = Submission.objects.get()
    for response in (client_b.get(f"/runs/{submission.pk}/"),
                     client_b.get(f"/runs/{submission.pk}/status.json"),
                     client_b.get("/submit/")):
        assert response.status_code == 200
        assert "SECRET-CODE-MARKER" not in response.content.decode()
    assert Objective.objects.get().description.endswith("SECRET-CODE-MARKER-91c")


@pytest.mark.django_db(transaction=True)
def test_thread_runner_does_not_block_and_goes_queued_running_ok(settings, monkeypatch):
    """A gate on the trusted side (nothing outside can reach a sandboxed hook): the loss
    servers wait for it before they say hello, so the cells stay running until it opens."""
    settings.HARNESS_EXECUTOR = "thread"
    gate = threading.Event()
    start_servers = LossServers.start

    def gated(self):
        gate.wait(120)
        return start_servers(self)

    monkeypatch.setattr(LossServers, "start", gated)
    User.objects.create_user("carol", password="pw-carol-123")
    client = Client()
    client.force_login(User.objects.get(username="carol"))
    start = time.monotonic()
    response = submit(client, CE, seeds=1)
    assert response.status_code == 302 and time.monotonic() - start < 30
    submission = Submission.objects.get()
    try:
        first = status(client, submission)
        assert not first["finished"]  # training cannot pass the gate yet
        assert {c["status"] for c in first["cells"]} <= {"queued", "running"}
        running = wait_for(client, submission, lambda s: s["counts"]["running"] == VARIANTS)
        assert running["counts"]["running"] == VARIANTS
        assert Cell.objects.filter(started_at__isnull=False).count() == VARIANTS
        gate.set()
        done = wait_for(client, submission, lambda s: s["finished"])
    finally:
        gate.set()
        assert executors.drain(timeout=120)
    assert done["finished"] and done["counts"]["ok"] == VARIANTS


# --- errors shown to users --------------------------------------------------------------


def _boom(request):
    raise ZeroDivisionError("secret-internal-detail")


urlpatterns = [path("boom/", _boom)]


def test_unknown_run_is_a_plain_404(client):
    response = client.get("/runs/987654/")
    assert response.status_code == 404
    assert "Not found" in response.content.decode()
    assert client.get("/runs/987654/status.json").status_code == 404


@pytest.mark.urls(__name__)
def test_a_server_error_shows_no_traceback(settings):
    assert settings.DEBUG is False
    response = Client(raise_request_exception=False).get("/boom/")
    assert response.status_code == 500
    text = response.content.decode()
    assert "Something went wrong" in text
    for leak in ("Traceback", "ZeroDivisionError", "secret-internal-detail", "test_submit"):
        assert leak not in text


@pytest.mark.slow
def test_a_classification_loss_runs_on_three_suites(client_a, settings,
                                                    django_capture_on_commit_callbacks):
    """The cross-suite profile: one submitted loss, trained in the sandbox on noisy-labels,
    certified and calibration (1-epoch smoke versions, which the leaderboard pages keep
    apart from real results), each cell judged with its suite's headline."""
    from harness.contract.registry import get_suite

    settings.HARNESS_EXECUTOR = "inline"
    form = client_a.get("/submit/").content.decode()
    three = ["noisy-labels", "certified", "calibration"]
    assert all(f'value="{s}"' in form for s in three)
    with django_capture_on_commit_callbacks(execute=True):
        submit(client_a, seeds=1, suites=three)
    submission = Submission.objects.get()
    assert status(client_a, submission)["finished"] is True
    assert {c.suite for c in submission.cells.all()} == set(three)
    assert not submission.cells.exclude(status="ok").exists(), list(
        submission.cells.exclude(status="ok").values_list("suite", "variant", "error"))
    for name in three:
        headline = get_suite(name).headline
        cells = submission.cells.filter(suite=name)
        assert cells.count() == cells.filter(metrics__name=headline).count() > 0
    html = client_a.get(f"/runs/{submission.pk}/").content.decode()
    for name in three:
        assert f'href="/suites/{name}/"' in html


# --- a suite that refuses the objective's hooks ------------------------------------------

TENT = '''
def tta_loss(logits):
    logp = logits.log_softmax(-1)
    return -(logp.exp() * logp).sum(-1)
'''


def test_a_classification_loss_ticked_for_tta_is_refused_with_what_tta_needs(client_a):
    response = submit(client_a, suites=["noisy-labels", "tta"])
    html = response.content.decode()
    assert response.status_code == 200 and nothing_created()
    assert ("tta: not supported by an objective defining classification_loss (tta needs "
            "tta_loss or tta_adjust)") in html


def test_no_suite_ticked_runs_the_suites_the_hooks_fit(client_a):
    assert 'value="tta" checked' not in client_a.get("/submit/").content.decode()
    submit(client_a, suites=[])
    assert "tta" not in Submission.objects.get().suites
    Submission.objects.all().delete()
    submit(client_a, TENT, name="entropy", suites=[])
    assert Submission.objects.get(version__objective__slug="entropy").suites == ["tta"]
