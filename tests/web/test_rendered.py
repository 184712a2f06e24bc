"""Page bodies rendered once per change and refreshed by the writer after a landing
(webapp/rendered.py), on real PostgreSQL with cells stored through store.store_results:
what a visitor gets is always what a fresh render gives."""

from __future__ import annotations

import numpy as np
import pytest

from harness.contract.suite import CellResult
from harness.storage import store
from harness.storage.models import Cell, TableCache
from tests.web.test_factorial import _grid, _store, _version
from tests.web.test_leaderboard import CE, ENV, GCE, MAE, SUITE, make_objective
from tests.web.test_leaderboard_incremental import Spy
from webapp import rendered

pytestmark = pytest.mark.django_db

PAGES = {"sym": dict(name="noisy-labels", variant="sym-0.4"),
         "clean": dict(name="noisy-labels", variant="clean", kind="builtin", show="all")}


def _land(version, variant: str, seed: int, acc: float) -> None:
    metrics = {"test_acc": acc, "best_test_acc": acc + 0.01, "noise_rate": 0.4}
    store.store_results(version, SUITE, [CellResult(variant, seed, "ok", metrics)], ENV)


def _bodies() -> dict[str, str]:
    out = {k: str(rendered.suite_body(**kw)[1]) for k, kw in PAGES.items()}
    out["home"] = str(rendered.home_body())
    return out


def test_a_landing_renders_again_the_bodies_people_read(client, monkeypatch,
                                                          django_capture_on_commit_callbacks):
    make_objective("ce", CE)
    gce = make_objective("gce", GCE)
    make_objective("mae", MAE)
    for url in ("/", "/suites/noisy-labels/?variant=sym-0.4",
                "/suites/noisy-labels/?variant=clean&kind=builtin&show=all"):
        assert client.get(url).status_code == 200
    renders = Spy(monkeypatch, rendered, "render_to_string")

    with django_capture_on_commit_callbacks(execute=True):
        _land(gce, "sym-0.4", 9, 0.42)
    # the writer rendered the three bodies again (the fingerprint of each changed)...
    assert sorted(renders.calls) == sorted([rendered.SUITE_BODY] * 2 + [rendered.HOME_BODY])
    renders.calls.clear()
    for url in ("/", "/suites/noisy-labels/?variant=sym-0.4"):
        page = client.get(url).content.decode()
    assert renders.calls == []  # ...so the visitors after it render nothing
    assert "42.0" in page  # the new seed is on the strip plot of sym-0.4

    served = _bodies()
    TableCache.objects.all().delete()
    assert _bodies() == served  # what was served is what a cold render gives


def test_the_writer_refreshes_only_the_most_recently_built_bodies(
        monkeypatch, settings, django_capture_on_commit_callbacks):
    settings.HARNESS_REFRESH_PAGES = 1
    make_objective("ce", CE)
    gce = make_objective("gce", GCE)
    _bodies()  # the clean body is the suite's most recently built
    renders = Spy(monkeypatch, rendered, "render_to_string")
    with django_capture_on_commit_callbacks(execute=True):
        _land(gce, "sym-0.4", 9, 0.42)
    assert len([c for c in renders.calls if c == rendered.SUITE_BODY]) == 1
    settings.HARNESS_REFRESH_PAGES = 0
    renders.calls.clear()
    with django_capture_on_commit_callbacks(execute=True):
        _land(gce, "sym-0.4", 10, 0.43)
    assert renders.calls == []


def test_a_refresh_that_fails_never_fails_the_landing(monkeypatch, caplog,
                                                      django_capture_on_commit_callbacks):
    make_objective("ce", CE)
    gce = make_objective("gce", GCE)
    _bodies()

    def broken(*args, **kwargs):
        raise RuntimeError("a template that cannot render now")

    monkeypatch.setattr(rendered, "render_to_string", broken)
    with django_capture_on_commit_callbacks(execute=True):
        _land(gce, "sym-0.4", 9, 0.42)
    assert Cell.objects.filter(seed=9, status="ok").exists()
    assert "refreshing a page body after a landing failed" in caplog.text
    monkeypatch.undo()
    assert "42.0" in str(rendered.suite_body(**PAGES["sym"])[1])  # its reader rebuilds it


def test_factorial_cells_change_the_suite_body(client):
    """Factorial cells are outside the cell tallies: the body's fingerprint has their own."""
    url = "/suites/noisy-labels/?variant=sym-0.4"
    assert 'id="variance-sources"' not in client.get(url).content.decode()
    version = _version("init-heavy")
    _store(version, "sym-0.4", _grid(np.random.default_rng(0)))
    assert 'id="variance-sources"' in client.get(url).content.decode()
    version.objective.visibility = "private"
    version.objective.save()
    assert 'id="variance-sources"' not in client.get(url).content.decode()


def test_a_body_is_keyed_by_the_templates_it_was_rendered_with(monkeypatch):
    make_objective("ce", CE)
    _bodies()
    renders = Spy(monkeypatch, rendered, "render_to_string")
    _bodies()
    assert renders.calls == []
    monkeypatch.setattr(rendered, "TEMPLATES_VERSION", "another-deploy")
    _bodies()
    assert len(renders.calls) == 3


def test_an_owners_body_never_reaches_another_visitor(client, django_capture_on_commit_callbacks):
    """The owner's view (with the private code) is built first and refreshed by a landing;
    anyone else still gets the body without it."""
    from django.contrib.auth.models import User

    alice = User.objects.create_user("alice", password="alice-pass-123")
    make_objective("ce", CE)
    secret = make_objective("secret", GCE, builtin=False, owner=alice, visibility="private",
                            code="SECRET_MARKER = 'do not leak'\n")
    client.login(username="alice", password="alice-pass-123")
    assert "SECRET_MARKER" in client.get("/objectives/secret/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        _land(secret, "sym-0.4", 9, 0.42)
    assert "SECRET_MARKER" in client.get("/objectives/secret/").content.decode()
    client.logout()
    anonymous = client.get("/objectives/secret/").content.decode()
    assert "SECRET_MARKER" not in anonymous
    assert "keeps this objective's code private" in anonymous


def test_query_strings_cannot_multiply_bodies(client):
    """Only an objective's default body is stored: curve choices (or junk, which shows the
    first variant) are rendered from cached numbers but add no stored row."""
    make_objective("ce", CE)
    make_objective("gce", GCE)
    assert client.get("/objectives/gce/").status_code == 200
    stored = TableCache.objects.count()
    for choice in ("x" * 5000, "clean'--", "", "sym-0.4 ", "sym-0.4", "clean"):
        assert client.get("/objectives/gce/", {"curves-noisy-labels": choice}).status_code == 200
    assert TableCache.objects.filter(key__contains=":objective:").count() == 1
    assert TableCache.objects.count() == stored + 1  # sym-0.4's curves payload, no body


def test_the_api_page_of_tables_is_served_as_a_fresh_computation_gives_it(client):
    """The suite endpoint splices a cached serialized page of tables into its answer."""
    make_objective("ce", CE)
    gce = make_objective("gce", GCE)
    url = "/api/suites/noisy-labels?page_size=2"
    before = client.get(url).json()
    _land(gce, "sym-0.4", 9, 0.42)
    after = client.get(url).json()
    seeds = {t["variant"]: next(r["seeds"] for r in t["rows"] if r["objective"] == "gce")
             for t in after["tables"]}
    assert seeds == {"clean": 4, "sym-0.4": 5} and after["count"] == before["count"] == 2
    TableCache.objects.all().delete()
    assert client.get(url).json() == after


def test_a_landing_serializes_again_the_api_pages_people_read(
        client, monkeypatch, django_capture_on_commit_callbacks):
    from webapp.leaderboard import boards

    make_objective("ce", CE)
    gce = make_objective("gce", GCE)
    url = "/api/suites/noisy-labels?page_size=2"
    client.get(url)
    with django_capture_on_commit_callbacks(execute=True):
        _land(gce, "sym-0.4", 9, 0.42)
    builds = Spy(monkeypatch, boards, "variant_tables_cached")
    answer = client.get(url).json()
    assert builds.calls == []  # the writer serialized the page already
    assert {t["variant"]: len(next(r for r in t["rows"] if r["objective"] == "gce")["values"])
            for t in answer["tables"]} == {"clean": 4, "sym-0.4": 5}
