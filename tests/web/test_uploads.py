"""Over 500 lines on purpose: every refusal of one endpoint, beside its fixtures.

Uploaded local results (``harness submit``) and their verification, on the real
PostgreSQL: API tokens, every refusal of the upload endpoint (nothing half-stored), the
secret sample, the exact comparison, and who sees what. The end-to-end runs, the CLI
against a live server and a real worker, are in tests/client/test_submit_cli.py."""

from __future__ import annotations

import copy
import json
import math
from collections import Counter

import pytest
from django.contrib.auth.models import User
from django.test import Client

from harness.contract.registry import get_suite
from harness.contract.suite import CellResult
from harness.storage import store
from harness.storage.models import (
    ApiToken,
    Cell,
    Objective,
    ObjectiveVersion,
    Submission,
    Upload,
    UploadedCell,
)
from webapp import tokens, verification

pytestmark = pytest.mark.django_db

SUITE = get_suite("noisy-labels").shortened(1)  # the server's HARNESS_RUN_EPOCHS=1
CE = ('"""Cross-entropy, uploaded."""\n\n\ndef classification_loss(logits, targets):\n'
      '    return -logits.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1)\n')
ENV = {"packages": {"torch": "2.14.1"}, "cpu_capability": "AVX512", "device": "cpu",
       "torch_threads": 1, "group_members": 6, "sandbox": {"protocol": "loss-only",
                                                          "row_order": "a1b2"}}


@pytest.fixture(autouse=True)
def _server(settings):
    settings.HARNESS_EXECUTOR = "none"  # the sample stays queued unless a test runs it
    settings.HARNESS_RUN_EPOCHS = 1


@pytest.fixture
def alice(db) -> User:
    return User.objects.create_user("alice", password="correct-horse-1")


@pytest.fixture
def token(alice) -> str:
    return tokens.create(alice, "laptop")[1]


def claimed(variant: str, seed: int, acc: float | None = None) -> dict:
    acc = 0.5 + seed / 100 if acc is None else acc
    return {"variant": variant, "seed": seed, "status": "ok", "diverged_step": None,
            "wall_time": 1.0, "metrics": {"test_acc": acc, "best_test_acc": acc},
            "curves": {"test_acc": [acc / 2, acc]}, "environment": ENV}


def body(variants=("clean", "sym-0.4"), seeds=3, **changes) -> dict:
    out = {"format": 1,
           "objective": {"name": "my_ce", "code": CE, "hyperparameters": {}},
           "suite": SUITE.name, "suite_version": SUITE.version,
           "cells": [claimed(v, s) for v in variants for s in range(seeds)]}
    out.update(changes)
    return out


def post(payload, token: str | None = None, *, raw: bytes | None = None,
         content_type: str = "application/json", **headers):
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    data = raw if raw is not None else json.dumps(payload)
    return Client().post("/api/uploads", data=data, content_type=content_type, **headers)


def nothing_stored() -> bool:
    return not (Upload.objects.exists() or UploadedCell.objects.exists()
                or Cell.objects.exists() or Submission.objects.exists()
                or ObjectiveVersion.objects.exists())


# --- tokens -----------------------------------------------------------------------------


def test_a_token_is_stored_as_its_hash_and_authenticates_its_user(alice):
    row, token = tokens.create(alice, "laptop")
    assert token.startswith("oh_") and len(token) > 40
    assert row.digest == tokens.digest(token) and token not in row.digest
    assert not ApiToken.objects.filter(digest=token).exists()
    assert tokens.user_for(f"Bearer {token}") == alice
    assert ApiToken.objects.get(pk=row.pk).last_used is not None
    other = tokens.create(alice, "ci")[1]
    assert other != token  # each token is fresh randomness


@pytest.mark.parametrize("header, words", [
    (None, "no API token"), ("Token abc", "Bearer <token>"), ("Bearer ", "Bearer <token>"),
    ("Bearer abc", "not an API token"), ("Bearer oh_" + "x" * 43, "unknown or revoked")])
def test_a_bad_authorization_header_is_refused_with_what_is_wrong(alice, header, words):
    with pytest.raises(tokens.TokenError, match=words):
        tokens.user_for(header)


def test_a_revoked_token_is_refused_and_only_its_owner_revokes_it(alice):
    bob = User.objects.create_user("bob")
    row, token = tokens.create(alice, "laptop")
    assert not tokens.revoke(bob, row.pk)
    assert tokens.user_for(f"Bearer {token}") == alice
    assert tokens.revoke(alice, row.pk) and not tokens.revoke(alice, row.pk)
    with pytest.raises(tokens.TokenError, match="revoked"):
        tokens.user_for(f"Bearer {token}")
    assert post(body(), token).status_code == 401


def test_the_account_page_shows_a_new_token_once_and_revokes_it(alice):
    assert Client().get("/accounts/").status_code == 302  # sign in first
    c = Client()
    c.force_login(alice)
    made = c.post("/accounts/", {"name": "laptop"})
    assert made.status_code == 200 and made["Cache-Control"] == "no-store"
    html = made.content.decode()
    start = html.index('id="new-token">') + len('id="new-token">')
    token = html[start:html.index("<", start)]
    assert tokens.user_for(f"Bearer {token}") == alice
    again = c.get("/accounts/").content.decode()
    assert token not in again and token[:10] in again  # shown once; its prefix names it
    row = ApiToken.objects.get(user=alice)
    assert c.post("/accounts/", {"revoke": str(row.pk)}).status_code == 302
    assert "revoked" in c.get("/accounts/").content.decode()
    with pytest.raises(tokens.TokenError):
        tokens.user_for(f"Bearer {token}")


def test_someone_elses_token_cannot_be_revoked_from_the_account_page(alice):
    row, token = tokens.create(alice, "laptop")
    mallory = User.objects.create_user("mallory")
    c = Client()
    c.force_login(mallory)
    c.post("/accounts/", {"revoke": str(row.pk)})
    assert tokens.user_for(f"Bearer {token}") == alice


def test_a_user_has_at_most_twenty_live_tokens(alice):
    made = [tokens.create(alice, f"t{i}")[0] for i in range(tokens.MAX_PER_USER)]
    with pytest.raises(tokens.TokenError, match="revoke one first"):
        tokens.create(alice, "one more")
    tokens.revoke(alice, made[0].pk)
    assert tokens.create(alice, "one more")[1].startswith("oh_")


# --- the sample -------------------------------------------------------------------------


def test_the_sample_takes_the_documented_share_of_each_variant_at_least_one():
    seeds = {"clean": range(5), "sym-0.4": range(10), "idn-0.4": range(3)}
    for share, sizes in ((0.2, {"clean": 1, "sym-0.4": 2, "idn-0.4": 1}),
                         (0.5, {"clean": 3, "sym-0.4": 5, "idn-0.4": 2}),
                         (1.0, {"clean": 5, "sym-0.4": 10, "idn-0.4": 3})):
        sample = verification.draw(seeds, share)
        assert Counter(v for v, _ in sample) == sizes
        assert all(s in seeds[v] for v, s in sample)


def test_the_sample_is_not_predictable_every_seed_gets_drawn():
    """400 draws of one seed out of five: each seed is drawn (a fixed or seeded choice
    would always draw the same one); each is expected 80 times."""
    counts = Counter(s for _ in range(400) for _, s in verification.draw({"clean": range(5)}))
    assert set(counts) == set(range(5)) and min(counts.values()) > 40


# --- the comparison ---------------------------------------------------------------------


def test_differences_lists_every_value_that_differs_and_nothing_else(alice):
    version = ObjectiveVersion.objects.create(
        objective=Objective.objects.create(slug="x", name="x"), code="", key="k", label="x")
    cell = Cell(version=version, suite=SUITE.name, suite_version=SUITE.version,
                variant="clean", seed=0, status=Cell.OK)
    mine = UploadedCell(variant="clean", seed=0, status="ok",
                        metrics={"test_acc": 0.5, "best_test_acc": 0.6},
                        curves={"test_acc": [0.1, 0.2, 0.3], "grad_norm": [1.0]})
    server_metrics = {"test_acc": 0.5, "best_test_acc": 0.6 + 1e-15}
    server_curves = {"test_acc": [0.1, 0.25, 0.3], "grad_norm": [1.0, 2.0]}
    assert verification.differences(mine, cell, server_metrics, server_curves) == [
        {"variant": "clean", "seed": 0, "metric": "best_test_acc", "local": 0.6,
         "server": 0.6 + 1e-15},
        {"variant": "clean", "seed": 0, "metric": "curve grad_norm", "local": "1 points",
         "server": "2 points"},
        {"variant": "clean", "seed": 0, "metric": "test_acc[1]", "local": 0.2,
         "server": 0.25}]
    same = verification.differences(mine, cell, dict(mine.metrics), copy.deepcopy(mine.curves))
    assert same == []


def test_environment_gap_names_what_the_numbers_depend_on():
    server = {**ENV, "cpu_capability": "AVX2", "group_members": 2,
              "sandbox": {"protocol": "loss-only", "row_order": "c3d4"}}
    assert verification.environment_gap(ENV, server) == [
        "CPU vector unit (cpu_capability): yours AVX512, the server's AVX2",
        "the sandbox's secret row order (its key): yours a1b2, the server's c3d4"]
    assert verification.environment_gap(ENV, {**ENV, "group_seconds": 3.0}) == []
    assert "torch version: yours not recorded" in verification.environment_gap({}, ENV)[0]


# --- the endpoint: accepted -------------------------------------------------------------


def test_an_upload_stores_the_claim_apart_and_queues_a_sample(alice, token):
    response = post(body(), token)
    assert response.status_code == 201, response.content
    answer = response.json()
    upload = Upload.objects.get()
    assert answer["id"] == upload.pk and answer["status"] == "pending"
    assert (upload.owner, upload.suite_version) == (alice, SUITE.version)
    assert upload.version.objective.slug == "my-ce" and upload.version.objective.owner == alice
    assert upload.version.objective.visibility == Objective.PUBLIC
    assert UploadedCell.objects.filter(upload=upload).count() == 6
    # one seed of three per variant (0.2 × 3 rounded up), queued on the server's side
    sample = {(c["variant"], c["seed"]) for c in answer["sample"]}
    assert Counter(v for v, _ in sample) == {"clean": 1, "sym-0.4": 1}
    cells = Cell.objects.filter(version=upload.version)
    assert {(c.variant, c.seed) for c in cells} == sample
    assert all(c.status == Cell.QUEUED and not c.metrics.exists() for c in cells)
    assert set(upload.sample.cells.all()) == set(cells)
    assert set(upload.claimed.filter(sampled=True).values_list("variant", "seed")) == sample
    # pending: on no public table, not even the sample's server cells once they land
    assert upload.version not in store.latest_versions(SUITE)


def test_the_owner_sees_a_pending_upload_others_do_not(alice, token):
    private = body()
    private["objective"] = {**private["objective"], "visibility": "private"}
    upload_id = post(private, token).json()["id"]
    assert Objective.objects.get(slug="my-ce").visibility == Objective.PRIVATE
    assert Client().get("/objectives/my-ce/").status_code == 404
    assert Client().get(f"/uploads/{upload_id}/").status_code == 404
    c = Client()
    c.force_login(alice)
    page = c.get(f"/uploads/{upload_id}/")
    assert page.status_code == 200 and b'data-status="pending"' in page.content
    assert c.get("/objectives/my-ce/").status_code == 200  # its owner sees it
    mine = Client().get(f"/api/uploads/{upload_id}", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert mine.status_code == 200 and mine.json()["status"] == "pending"
    other = tokens.create(User.objects.create_user("bob"), "x")[1]
    assert Client().get(f"/api/uploads/{upload_id}",
                        HTTP_AUTHORIZATION=f"Bearer {other}").status_code == 404


# --- the endpoint: refused, nothing stored ----------------------------------------------


def _without(d: dict, key: str) -> dict:
    return {k: v for k, v in d.items() if k != key}


def _cells(**change) -> list[dict]:
    cells = body()["cells"]
    cells[0] = {**cells[0], **change}
    return cells


REFUSED = [
    ("missing field", _without(body(), "cells"), 400, "missing cells"),
    ("unknown field", {**body(), "extra": 1}, 400, "unknown field 'extra'"),
    ("format", body(format=2), 400, "format must be 1"),
    ("unknown suite", body(suite="nope"), 400, "unknown suite 'nope'"),
    ("old suite version", body(suite_version="0.9"), 409, "this server runs version"),
    ("too few seeds", body(seeds=2), 400, "too few seeds"),
    ("held-out or unknown variant", body(cells=_cells(variant="mnist/sym-0.4")), 400,
     "not a public variant"),
    ("seed", body(cells=_cells(seed=-1)), 400, "seed must be an integer"),
    ("bool seed", body(cells=_cells(seed=True)), 400, "seed must be an integer"),
    ("status", body(cells=_cells(status="failed")), 400, "must be ok or diverged"),
    ("undeclared metric", body(cells=_cells(metrics={"test_acc": 0.5, "bogus": 1})), 400,
     "'bogus' is not a metric"),
    ("no headline", body(cells=_cells(metrics={"best_test_acc": 0.5})), 400,
     "needs its headline metric"),
    ("string metric", body(cells=_cells(metrics={"test_acc": "0.5"})), 400,
     "must be a finite number"),
    ("undeclared curve", body(cells=_cells(curves={"bogus": [1.0]})), 400,
     "'bogus' is not a curve"),
    ("curve values", body(cells=_cells(curves={"test_acc": ["x"]})), 400, "list of at most"),
    ("duplicate cell", body(cells=body()["cells"] + body()["cells"][:1]), 400,
     "appears twice"),
    ("builtin name", body(objective={"name": "ce", "code": CE, "hyperparameters": {}}), 409,
     "not yours"),
    ("hidden characters", body(objective={"name": "ce\u202e", "code": CE,
                                          "hyperparameters": {}}), 400, "plain text"),
    ("broken code", body(objective={"name": "my_ce", "code": "def classification_loss(:\n",
                                    "hyperparameters": {}}), 400, "did not pass validation"),
    ("unknown hyperparameter", body(objective={"name": "my_ce", "code": CE,
                                               "hyperparameters": {"q": 0.7}}), 400,
     "did not pass validation"),
    ("not an object", [1, 2], 400, "must be a JSON object"),
    ("huge integer metric", body(cells=_cells(metrics={"test_acc": 10 ** 400})), 400,
     "must be a finite number"),
    ("huge diverged_step", body(cells=_cells(diverged_step=2 ** 31)), 400,
     "diverged_step must be an integer in [0, 2^31)"),
    ("visibility", body(objective={"name": "my_ce", "code": CE, "hyperparameters": {},
                                   "visibility": "secret"}), 400, "public or private"),
]


@pytest.mark.parametrize("case, payload, status, words", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_bad_upload_is_refused_with_what_is_wrong_and_nothing_stored(
        token, case, payload, status, words):
    response = post(payload, token)
    assert response.status_code == status, response.content
    assert words in response.json()["error"] and response.json()["status"] == status
    assert nothing_stored()


def test_no_token_wrong_method_type_json_and_size_are_refused(token, settings):
    assert post(body()).status_code == 401
    assert post(body()).headers["WWW-Authenticate"].startswith("Bearer")
    assert Client().get("/api/uploads", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 405
    assert post(None, token, raw=b"{", content_type="application/json").status_code == 400
    nan = json.dumps(body()).replace('"wall_time": 1.0', '"wall_time": NaN', 1)
    assert "NaN" in post(None, token, raw=nan.encode()).json()["error"]
    assert post(None, token, raw=b"\xff\xfe").status_code == 400
    deep = post(None, token, raw=b"[" * 100_000 + b"]" * 100_000)
    assert deep.status_code == 400 and "nested too deeply" in deep.json()["error"]
    huge = json.dumps(body()).replace('"wall_time": 1.0', '"wall_time": 1e400', 1)
    assert "finite" in post(None, token, raw=huge.encode()).json()["error"]
    assert post(None, token, raw=json.dumps(body()).encode(),
                content_type="text/plain").status_code == 415
    settings.MAX_UPLOAD_BYTES = 1000
    big = post(body(), token)
    assert big.status_code == 413 and "limit is 1000 bytes" in big.json()["error"]
    settings.MAX_OBJECTIVE_BYTES = 50
    settings.MAX_UPLOAD_BYTES = 10 ** 6
    assert "the limit is 50" in post(body(), token).json()["error"]
    assert nothing_stored()


def test_an_objective_name_of_another_user_is_refused(token):
    bob = User.objects.create_user("bob")
    assert post(body(), tokens.create(bob, "b")[1]).status_code == 201
    before = Upload.objects.count()
    response = post(body(), token)
    assert response.status_code == 409 and "not yours" in response.json()["error"]
    assert Upload.objects.count() == before


def test_a_keyed_server_refuses_public_draw_results_and_says_what_to_do(
        token, monkeypatch, client):
    """Its cells are drawn from its key: a public-draw upload could never verify."""
    monkeypatch.setenv("HARNESS_DRAWS_KEY", "the-server-draws-key")
    response = post(body(), token)
    assert response.status_code == 409 and "Submit page" in response.json()["error"]
    assert nothing_stored()
    assert "keyed draws (" in client.get("/api/").content.decode()  # every page's footer


def test_the_per_user_cap_counts_the_sample(token, settings):
    settings.MAX_QUEUED_CELLS_PER_USER = 1
    response = post(body(), token)  # a sample of 2 cells
    assert response.status_code == 429 and "limit is 1" in response.json()["error"]
    assert nothing_stored()


# --- settling ---------------------------------------------------------------------------


def _land(upload: Upload, change=None, env=ENV, status=Cell.OK, suite=SUITE):
    """The server's results of the sample as a worker stores them: the claimed values
    (changed by ``change(metrics, curves)``), in the environment ``env``."""
    version = upload.version
    queued = upload.sample.cells.filter(status=Cell.QUEUED)
    waiting = set(queued.values_list("variant", "seed"))
    results = []
    for c in upload.claimed.filter(sampled=True):
        if (c.variant, c.seed) not in waiting:
            continue  # a result the server had already
        metrics, curves = dict(c.metrics), copy.deepcopy(c.curves)
        if change:
            change(metrics, curves)
        results.append(CellResult(c.variant, c.seed, status, metrics, curves, wall_time=2.0,
                                  reason="objective" if status == Cell.FAILED else ""))
    ids = list(queued.values_list("pk", flat=True))
    Cell.objects.filter(pk__in=ids).update(status=Cell.RUNNING, attempts=1)
    store.store_results(version, suite, results, env, claim={pk: 1 for pk in ids})
    verification.settle_cells(ids)
    upload.refresh_from_db()
    return upload


def test_equal_numbers_verify_and_promote_the_claim_to_public_results(alice, token):
    upload = Upload.objects.get(pk=post(body(), token).json()["id"])
    partial = upload.sample.cells.first()
    Cell.objects.filter(pk=partial.pk).update(status=Cell.RUNNING)
    assert verification.settle(upload.pk) == Upload.PENDING  # not every sampled cell landed
    Cell.objects.filter(pk=partial.pk).update(status=Cell.QUEUED)
    upload = _land(upload)
    assert upload.status == Upload.VERIFIED and upload.differences == []
    cells = Cell.objects.filter(version=upload.version, status=Cell.OK)
    assert cells.count() == 6  # 2 re-run by the server + 4 promoted claims
    promoted = cells.filter(environment__uploaded=upload.pk)
    assert promoted.count() == 4 and all(
        c.metrics.get(name="test_acc").value == 0.5 + c.seed / 100 for c in promoted)
    assert upload.version in store.latest_versions(SUITE)
    assert store.verified_versions([upload.version_id]) == {upload.version_id}
    assert Client().get(f"/uploads/{upload.pk}/").status_code == 200  # public once verified
    assert Client().get("/api/objectives/my-ce").status_code == 200
    assert "my-ce" in Client().get("/api/objectives").content.decode()


def test_one_differing_value_is_a_mismatch_listing_that_cell_and_nothing_is_promoted(token):
    upload = Upload.objects.get(pk=post(body(), token).json()["id"])

    def tamper(metrics, curves):
        metrics["test_acc"] = math.nextafter(metrics["test_acc"], 1.0)  # one ulp

    upload = _land(upload, tamper)
    assert upload.status == Upload.MISMATCH and upload.reason == ""
    sample = sorted(upload.claimed.filter(sampled=True).values_list("variant", "seed"))
    assert sorted((d["variant"], d["seed"]) for d in upload.differences) == sample
    assert {d["metric"] for d in upload.differences} == {"test_acc"}
    d = upload.differences[0]
    assert d["server"] == math.nextafter(d["local"], 1.0)
    assert Cell.objects.filter(version=upload.version).count() == 2  # the sample only
    assert upload.version not in store.latest_versions(SUITE)
    assert Client().get(f"/uploads/{upload.pk}/").status_code == 404
    assert Client().get("/objectives/my-ce/").status_code == 404  # nor its objective
    assert Client().get("/api/objectives/my-ce").status_code == 404
    assert "my-ce" not in Client().get("/api/objectives").content.decode()
    owner = Client()
    owner.force_login(upload.owner)
    html = owner.get(f"/uploads/{upload.pk}/").content.decode()
    assert 'id="differences"' in html and f"<td>{d['variant']}</td>" in html


def test_different_numbers_on_a_different_vector_unit_are_unverifiable_not_mismatch(token):
    upload = Upload.objects.get(pk=post(body(), token).json()["id"])
    upload = _land(upload, lambda m, c: m.update(test_acc=0.1),
                   env={**ENV, "cpu_capability": "AVX2"})
    assert upload.status == Upload.UNVERIFIABLE
    assert "cpu_capability): yours AVX512, the server's AVX2" in upload.reason
    assert upload.differences and upload.version not in store.latest_versions(SUITE)


def test_equal_numbers_on_a_different_machine_still_verify(token):
    upload = Upload.objects.get(pk=post(body(), token).json()["id"])
    upload = _land(upload, env={**ENV, "torch_threads": 4})
    assert upload.status == Upload.VERIFIED


def test_a_sample_the_server_could_not_run_is_unverifiable_with_why(token):
    upload = Upload.objects.get(pk=post(body(), token).json()["id"])
    upload = _land(upload, status=Cell.FAILED)
    assert upload.status == Upload.UNVERIFIABLE
    assert "did not finish" in upload.reason and "failed (objective)" in upload.reason


def test_verified_rows_carry_the_mark_and_the_page_explains_it(token, settings):
    from webapp import leaderboard

    settings.HARNESS_RUN_EPOCHS = None  # the full suite version, which the pages show
    full = get_suite("noisy-labels")
    upload = Upload.objects.get(pk=post(body(suite_version=full.version), token).json()["id"])
    _land(upload, suite=full)
    row = next(r for r in leaderboard.variant_table(full, "clean")["rows"])
    assert (row["slug"], row["verified"]) == ("my-ce", True)
    html = Client().get("/suites/noisy-labels/?variant=clean").content.decode()
    assert html.count('class="badge verified"') == 2  # the row's mark and its explanation
    assert "re-ran a random sample of their seeds" in html


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_the_upload_operations_keep_the_contract_with_a_token(transactional_db, mode):
    """schemathesis on the token operations, authenticated (tests/web/test_api_schema.py runs
    every operation without a token: all 401 here): generated bodies and ids are answered
    as documented, never a 5xx, and nothing half-stored. A schema-valid body may still be
    refused with a 400 (the check that it is accepted is left out): a schema cannot say
    that the code passes validation, that a variant belongs to the suite named, or that
    each variant has the suite's minimum of seeds."""
    import schemathesis
    from django.core.wsgi import get_wsgi_application
    from hypothesis import HealthCheck, given, settings
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    token = tokens.create(User.objects.create_user("fuzz"), "fuzz")[1]
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())
    generation = schemathesis.GenerationMode(mode)
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if not operation.path.startswith("/api/uploads"):
            continue

        @given(case=operation.as_strategy(generation_mode=generation))
        @settings(max_examples=40, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case):
            case.call_and_validate(headers={"Authorization": f"Bearer {token}"},
                                   excluded_checks=[positive_data_acceptance])

        try:
            check()
        except Exception as exc:  # noqa: BLE001 - collected, reported below
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
    assert nothing_stored()


def test_a_later_upload_is_compared_with_the_results_already_there(token):
    """Cells of the version the server has (here: a verified upload's) are checked at no
    cost; the secret draw is among the new seeds only."""
    first = _land(Upload.objects.get(pk=post(body(), token).json()["id"]))
    assert first.status == Upload.VERIFIED
    more = body(seeds=4)  # seeds 0-2 as before, plus seed 3
    more["cells"] = [{**c, "metrics": {**c["metrics"], "test_acc": 0.9}}
                     if (c["variant"], c["seed"]) == ("clean", 0) else c for c in more["cells"]]
    answer = post(more, token).json()
    sample = {(c["variant"], c["seed"]) for c in answer["sample"]}
    old = {(v, s) for v in ("clean", "sym-0.4") for s in range(3)}
    assert old <= sample and sample - old == {("clean", 3), ("sym-0.4", 3)}
    second = _land(Upload.objects.get(pk=answer["id"]))  # the new seeds' server runs
    assert second.status == Upload.MISMATCH
    assert [(d["variant"], d["seed"], d["metric"], d["local"]) for d in second.differences] == [
        ("clean", 0, "test_acc", 0.9)]


def test_the_api_index_documents_the_upload_operations():
    html = Client().get("/api/").content.decode()
    assert "POST /api/uploads" in html and "GET /api/uploads/{id}" in html
    assert "Authorization: Bearer" in html


@pytest.mark.parametrize("server, clear", [
    ("http://leaderboard.example.org", True), ("https://leaderboard.example.org", False),
    ("http://localhost:8000", False), ("http://127.0.0.1:8000/", False)])
def test_submit_warns_before_a_token_crosses_the_network_in_clear(server, clear):
    from harness.upload import sends_in_clear

    assert sends_in_clear(server) is clear


def test_deleting_a_user_takes_their_tokens_and_uploads(alice, token):
    post(body(), token)
    alice.delete()
    assert not (ApiToken.objects.exists() or Upload.objects.exists()
                or UploadedCell.objects.exists() or Submission.objects.exists())
