"""Django's admin for staff (issue 35, staff tools): behind the login, closed to users who
are not staff, and read-only wherever an edit would break the stored numbers."""

from __future__ import annotations

import pytest

from harness.storage.models import Cell
from tests.web.test_leaderboard import make_objective

pytestmark = pytest.mark.django_db


def test_admin_is_for_staff_and_leaves_the_numbers_alone(client, django_user_model):
    version = make_objective("ce", {"clean": [0.8]})
    cell = Cell.objects.get(version=version)
    answer = client.get("/admin/")
    assert answer.status_code == 302 and answer["Location"].startswith("/admin/login/")
    client.force_login(django_user_model.objects.create_user("visitor"))
    assert client.get("/admin/").status_code == 302  # not staff: back to the login
    client.force_login(django_user_model.objects.create_superuser("op", "op@example.org", "x"))
    assert client.get("/admin/").status_code == 200
    assert client.get("/admin/webapp/cell/").status_code == 200
    page = client.get(f"/admin/webapp/cell/{cell.pk}/change/").content.decode()
    assert "ce" in page and 'name="status"' not in page  # shown, not editable
    for model in ("cell", "objectiveversion", "submission", "upload"):
        assert client.get(f"/admin/webapp/{model}/add/").status_code == 403
    assert client.post(f"/admin/webapp/cell/{cell.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Cell.objects.filter(pk=cell.pk, status="ok").exists()
    # an objective's wording and visibility are staff's to edit, its identity is not
    objective = version.objective
    edit = client.get(f"/admin/webapp/objective/{objective.pk}/change/").content.decode()
    assert 'name="visibility"' in edit and 'name="slug"' not in edit
