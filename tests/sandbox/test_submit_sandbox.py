"""Submitted code never executes in the web process: the form's validator runs in the sandbox."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from harness.objectives.loading import load_objective
from harness.sandbox import validate_sandboxed
from harness.storage.models import Cell, Objective, ObjectiveVersion, Submission

pytestmark = pytest.mark.django_db

CE = '''import torch.nn.functional as F


def classification_loss(logits, targets, *, t: float = 1.0):
    return F.cross_entropy(logits / t, targets)
'''


@pytest.fixture
def client_a(settings) -> Client:
    settings.HARNESS_EXECUTOR = "none"
    c = Client()
    c.force_login(User.objects.create_user("alice", password="correct-horse-1"))
    return c


def _post(client: Client, code: str, **fields):
    data = {"name": "my loss", "description": "", "paper_url": "", "code_text": code,
            "visibility": "public", "hyperparameters": "", "suites": ["noisy-labels"],
            "seeds": 2, **fields}
    return client.post("/submit/", data)


def test_code_running_at_import_is_refused_by_the_sandbox_not_run_here(client_a, tmp_path):
    marker = tmp_path / f"pwned-{uuid.uuid4().hex}"
    hostile = (f"import os\nos.system('touch {marker}')\nopen({str(marker)!r}, 'w')\n"
               + CE)
    response = _post(client_a, hostile)
    assert response.status_code == 200  # the form again, with the error
    assert "starting a process (os.system) is not allowed" in response.content.decode()
    assert not marker.exists()
    assert not (Objective.objects.exists() or ObjectiveVersion.objects.exists()
                or Submission.objects.exists() or Cell.objects.exists())


def test_a_secret_of_the_web_process_is_not_visible_to_the_validator(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_TEST_SECRET", "s3cr3t-in-the-web-process")
    code = ("import os\nassert 'HARNESS_TEST_SECRET' not in os.environ, 'leaked'\n"
            "assert 'DATABASE_URL' not in os.environ, 'leaked'\n" + CE)
    report = validate_sandboxed(code, "peek.py")
    assert report.ok, [p.message for p in report.problems]


def test_the_sandboxed_description_matches_a_trusted_load(tmp_path):
    path = Path(tmp_path) / "mine.py"
    path.write_text(CE)
    trusted = load_objective(str(path), {"t": 2.0})
    described = validate_sandboxed(CE, "mine.py", {"t": 2.0}).objective
    assert described is not None
    assert (described.name, list(described.hooks), dict(described.hyperparameters)) == \
        (trusted.name, list(trusted.hooks), dict(trusted.hyperparameters))
    assert described.version_key == trusted.version_key
    assert described.label == trusted.label == "mine(t=2.0)"
    with pytest.raises(RuntimeError, match="only in the sandbox"):
        described.hooks["classification_loss"]()


def test_a_valid_submission_is_queued_after_sandboxed_validation(client_a):
    response = _post(client_a, CE, hyperparameters="t = 2.0")
    assert response.status_code == 302
    version = ObjectiveVersion.objects.get()
    assert version.hyperparameters == {"t": 2.0}
    assert version.code == CE
    assert Cell.objects.filter(version=version).count() > 0
