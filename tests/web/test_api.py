"""Over 500 lines on purpose: 27 API cases on one fixture of stored cells (``data``).

The read-only JSON API on a real PostgreSQL: shapes, values, pagination, filters,
private code, JSON errors, query counts, and the OpenAPI document against live answers."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import resolve

from harness.contract.registry import get_suite, suite_names
from harness.contract.suite import CellResult
from harness.storage import store
from harness.storage.models import Cell, Objective, ObjectiveVersion
from webapp import openapi

pytestmark = pytest.mark.django_db
SUITE = get_suite("noisy-labels")
ENV = {"python": "3.11", "device": "cpu"}
SECRET = "SECRET_MARKER_7f3a"
SEEDS = (0, 1, 2)


def _version(slug: str, *, owner=None, builtin: bool = False, private: bool = False,
             code: str = "def classification_loss(logits, targets):\n    return 0\n"):
    objective = Objective.objects.create(
        slug=slug, name=slug, owner=owner, is_builtin=builtin,
        visibility=Objective.PRIVATE if private else Objective.PUBLIC)
    return ObjectiveVersion.objects.create(
        objective=objective, code=code, code_sha256=f"{slug:0<64}"[:64],
        hyperparameters={"q": 0.7} if slug == "gce" else {}, key=slug, label=slug)


def _acc(slug: str, variant: str, seed: int) -> float:
    base = {"ce": 0.70, "gce": 0.80, "secret-loss": 0.75, "open-loss": 0.60}.get(slug, 0.5)
    return base - (0.1 if variant == "sym-0.4" else 0.0) + 0.01 * seed


def _store(version, variants=("clean", "sym-0.4"), seeds=SEEDS, status="ok", error=""):
    slug = version.objective.slug
    store.store_results(version, SUITE, [
        CellResult(v, s, status, {"test_acc": _acc(slug, v, s), "noise_rate": 0.4},
                   {"test_acc": [0.1, _acc(slug, v, s)]}, error=error, wall_time=1.0)
        for v in variants for s in seeds], ENV)


@pytest.fixture
def users():
    model = get_user_model()
    return model.objects.create_user("alice", password="pw"), model.objects.create_user(
        "bob", password="pw")


@pytest.fixture
def data(users):
    alice, bob = users
    versions = {
        "ce": _version("ce", builtin=True),
        "gce": _version("gce", builtin=True),
        "secret-loss": _version("secret-loss", owner=alice, private=True,
                                code=f"# {SECRET}\ndef classification_loss(l, t):\n    pass\n"),
        "open-loss": _version("open-loss", owner=bob),
    }
    for v in versions.values():
        _store(v)
    # A diverged and a failed seed; the failure quotes the private code.
    _store(versions["secret-loss"], variants=("sym-0.6",), seeds=(0,), status="diverged")
    _store(versions["secret-loss"], variants=("sym-0.6",), seeds=(1,), status="failed",
           error=f'File "objective.py", line 2\n    {SECRET}\nValueError: boom')
    Cell.objects.create(version=versions["gce"], suite=SUITE.name, suite_version=SUITE.version,
                        variant="sym-0.6", seed=0, variant_hash="h")  # queued
    return versions


def _get(client: Client, url: str, status: int = 200) -> dict:
    response = client.get(url)
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    # Strict JSON: NaN/Infinity would be accepted by json.loads by default.
    return json.loads(response.content, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


def _assert_error(client: Client, url: str, status: int, words: str) -> None:
    body = _get(client, url, status)
    assert body["status"] == status and words in body["error"]
    assert "Traceback" not in body["error"]


# ---------------------------------------------------------------- suites
def test_suites_list_the_registry_with_metrics_and_variants(client):
    body = _get(client, "/api/suites")
    assert [s["name"] for s in body["suites"]] == suite_names()
    nl = next(s for s in body["suites"] if s["name"] == "noisy-labels")
    assert (nl["version"], nl["hooks"], nl["headline"], nl["reference"]) == (
        SUITE.version, ["classification_loss"], "test_acc", "ce")
    assert nl["baselines"][0] == "ce" and nl["anchors"] == {"worst": 0.1, "best": 1.0}
    assert nl["variant_axis"] == {"key": "rate", "label": "noise rate", "unit": ""}
    metrics = {m["name"]: m for m in nl["metrics"]}
    assert metrics["test_acc"]["higher_is_better"] is True
    assert (metrics["test_acc"]["better"], metrics["test_acc"]["unit"]) == ("higher", "percent")
    assert metrics["memorization"]["higher_is_better"] is False
    assert metrics["memorization"]["better"] == "lower"
    assert metrics["noise_rate"]["better"] == "neither"
    certified = next(s for s in body["suites"] if s["name"] == "certified")
    assert certified["lifts"] == ["classification_loss"]
    curves = {c["name"]: c for c in certified["curves"]}
    assert curves["verified_vs_eps"]["x_label"] == "ε"
    assert curves["verified_vs_eps"]["x_values"] == "eps_grid"
    assert curves["train_loss"]["x_label"] == "epoch"
    assert metrics["test_acc"]["label"] == SUITE.metric("test_acc").label
    variants = {v["name"]: v for v in nl["variants"]}
    assert list(variants) == [v.name for v in SUITE.variants]
    assert variants["sym-0.4"]["config"] == {"dataset": "digits", "noise": "symmetric",
                                             "rate": 0.4}
    assert variants["sym-0.4"]["default"] is True and variants["sym-0.4"]["queue"] == "cpu"
    assert variants["mnist/sym-0.4"]["default"] is False
    assert variants["mnist/sym-0.4"]["queue"] == "gpu"
    assert nl["url"] == "/api/suites/noisy-labels"


def test_suite_detail_has_one_table_per_requested_variant(client, data):
    body = _get(client, "/api/suites/noisy-labels?variant=sym-0.4")
    assert body["suite"]["name"] == "noisy-labels"
    [table] = body["tables"]
    assert (table["variant"], table["headline"], table["reference"]) == ("sym-0.4", "test_acc",
                                                                          "ce")
    rows = {r["objective"]: r for r in table["rows"]}
    assert set(rows) == {"ce", "gce", "secret-loss", "open-loss"}
    assert [r["objective"] for r in table["rows"]][0] == "gce"  # best first
    gce = rows["gce"]
    expected = [_acc("gce", "sym-0.4", s) for s in SEEDS]
    assert gce["seeds"] == 3 and gce["diverged"] == 0
    assert gce["mean"] == pytest.approx(np.mean(expected))
    assert gce["ci_low"] <= gce["mean"] <= gce["ci_high"]
    assert {int(k): v for k, v in gce["values"].items()} == pytest.approx(dict(
        zip(SEEDS, expected, strict=True)))
    assert gce["vs_reference"]["prob_improvement"] == pytest.approx(1.0)
    assert rows["ce"]["is_reference"] and rows["ce"]["vs_reference"] is None


def test_suite_detail_defaults_to_the_default_variants_with_results(client, data):
    body = _get(client, "/api/suites/noisy-labels")
    assert [t["variant"] for t in body["tables"]] == ["clean", "sym-0.4", "sym-0.6"]
    sym06 = {r["objective"]: r for r in body["tables"][2]["rows"]}
    assert (sym06["secret-loss"]["diverged"], sym06["secret-loss"]["failed"]) == (1, 1)
    two = _get(client, "/api/suites/noisy-labels?variant=clean,sym-0.4")
    assert [t["variant"] for t in two["tables"]] == ["clean", "sym-0.4"]
    repeated = _get(client, "/api/suites/noisy-labels?variant=clean&variant=sym-0.4")
    assert [t["variant"] for t in repeated["tables"]] == ["clean", "sym-0.4"]


def test_suite_detail_pages_by_variant(client, data):
    whole = _get(client, "/api/suites/noisy-labels")
    assert (whole["count"], whole["page"], whole["pages"], whole["next"]) == (3, 1, 1, None)
    first = _get(client, "/api/suites/noisy-labels?page_size=2")
    assert [t["variant"] for t in first["tables"]] == ["clean", "sym-0.4"]
    assert (first["count"], first["pages"], first["previous"]) == (3, 2, None)
    second = _get(client, first["next"])
    assert [t["variant"] for t in second["tables"]] == ["sym-0.6"]
    assert second["next"] is None and second["page"] == 2
    assert second["tables"][0] == whole["tables"][2]  # a page's table is the whole answer's
    assert _get(client, "/api/suites/noisy-labels?page=3&page_size=2")["tables"] == []
    chosen = _get(client, "/api/suites/noisy-labels?variant=sym-0.6,clean&page_size=1&page=2")
    assert [t["variant"] for t in chosen["tables"]] == ["clean"] and chosen["count"] == 2
    for bad in ("page=0", "page_size=0", "page_size=51", "page=x"):
        assert client.get(f"/api/suites/noisy-labels?{bad}").status_code == 400, bad


def test_unknown_suite_or_variant_is_a_json_404(client, data):
    _assert_error(client, "/api/suites/no-such-suite", 404, "unknown suite 'no-such-suite'")
    _assert_error(client, "/api/suites/noisy-labels?variant=sym-0.9", 404,
                  "no variant 'sym-0.9'")
    _assert_error(client, "/api/results?suite=nope", 404, "unknown suite")
    _assert_error(client, "/api/results?suite=noisy-labels&variant=nope", 404, "no variant")
    _assert_error(client, "/api/no/such/endpoint", 404, "no API endpoint")


# ---------------------------------------------------------------- objectives
def test_objectives_are_listed_with_versions_and_never_code(client, data):
    body = _get(client, "/api/objectives")
    assert body["count"] == 4 and body["pages"] == 1 and body["next"] is None
    assert [o["slug"] for o in body["results"]] == ["ce", "gce", "open-loss", "secret-loss"]
    by_slug = {o["slug"]: o for o in body["results"]}
    assert by_slug["ce"]["builtin"] and by_slug["ce"]["owner"] is None
    assert by_slug["secret-loss"]["owner"] == "alice"
    assert by_slug["secret-loss"]["visibility"] == "private"
    [gce] = by_slug["gce"]["versions"]
    assert gce == {"id": data["gce"].id, "label": "gce", "code_sha256": data["gce"].code_sha256,
                   "hyperparameters": {"q": 0.7}, "created": gce["created"]}
    assert SECRET not in json.dumps(body) and '"code"' not in json.dumps(body)


def test_profile_summary_has_the_mean_and_the_worst_variant(client, data):
    body = _get(client, "/api/objectives/gce")
    suite = next(s for s in body["suites"] if s["suite"] == "noisy-labels")
    [row] = suite["summary"]
    means = {v: np.mean([_acc("gce", v, s) for s in SEEDS]) for v in ("clean", "sym-0.4")}
    assert row["variant_means"] == pytest.approx(means)
    assert row["mean"] == pytest.approx(np.mean(list(means.values())))
    assert row["worst_variant"] == "sym-0.4"  # 0.1 lower on every seed: higher is better
    assert row["worst"] == pytest.approx(means["sym-0.4"])


def test_objectives_are_paginated_and_filtered(client, data):
    first = _get(client, "/api/objectives?page_size=3")
    assert (first["count"], first["pages"], first["page_size"]) == (4, 2, 3)
    assert first["previous"] is None and "page=2" in first["next"]
    second = _get(client, first["next"])
    assert [o["slug"] for o in second["results"]] == ["secret-loss"]
    assert second["next"] is None and "page=1" in second["previous"]
    assert _get(client, "/api/objectives?page=9")["results"] == []
    builtin = _get(client, "/api/objectives?builtin=true")
    assert [o["slug"] for o in builtin["results"]] == ["ce", "gce"]
    assert _get(client, "/api/objectives?builtin=false")["count"] == 2


def test_a_flag_is_one_of_the_documented_spellings_exactly(client, data):
    for raw in ("False", "TRUE", "Yes", "on"):
        _assert_error(client, f"/api/objectives?builtin={raw}", 400, "builtin must be true")


def test_a_nul_in_a_text_parameter_matches_nothing_and_is_not_a_500(client, data):
    """PostgreSQL text cannot hold a NUL: such a value is in no cell (found by the
    schemathesis run: it reached the database and was a 500)."""
    _assert_error(client, "/api/results?objective=ce%00x", 404, "unknown objective")
    assert _get(client, "/api/results?suite_version=1.0%00")["count"] == 0
    assert _get(client, "/api/results?variant=clean%00")["count"] == 0
    assert _get(client, "/api/results?variant=clean%00,clean")["count"] == _get(
        client, "/api/results?variant=clean")["count"] > 0


@pytest.mark.parametrize("query, words", [
    ("page=0", "page must be between 1 and"),
    ("page=two", "page must be an integer"),
    ("page_size=201", "page_size must be between 1 and 200"),
    ("builtin=maybe", "builtin must be true or false"),
])
def test_bad_parameters_are_a_json_400(client, data, query, words):
    _assert_error(client, f"/api/objectives?{query}", 400, words)


def test_private_code_only_for_its_owner(client, data, users):
    alice, bob = users
    url = "/api/objectives/secret-loss"
    anonymous = client.get(url)
    assert anonymous.status_code == 200 and SECRET.encode() not in anonymous.content
    assert "code" not in anonymous.json()
    other = Client()
    other.force_login(bob)
    response = other.get(url)
    assert response.status_code == 200 and SECRET.encode() not in response.content
    owner = Client()
    owner.force_login(alice)
    assert SECRET in owner.get(url).json()["code"]
    public = _get(client, "/api/objectives/open-loss")
    assert public["slug"] == "open-loss" and "classification_loss" in public["code"]
    _assert_error(client, "/api/objectives/no-such-objective", 404, "unknown objective")
    _assert_error(client, "/api/objectives/open_loss", 404,  # its name, not its slug
                  "addressed by slug: /api/objectives/open-loss")


# ---------------------------------------------------------------- results
def test_results_are_tidy_per_seed_records(client, data):
    body = _get(client, "/api/results?suite=noisy-labels&variant=sym-0.4&objective=gce")
    assert body["count"] == 3
    records = body["results"]
    assert [r["seed"] for r in records] == list(SEEDS)
    r = records[1]
    assert (r["objective"], r["version_label"], r["suite"], r["suite_version"], r["variant"],
            r["status"]) == ("gce", "gce", "noisy-labels", SUITE.version, "sym-0.4", "ok")
    assert r["metrics"] == {"test_acc": pytest.approx(_acc("gce", "sym-0.4", 1)),
                            "noise_rate": pytest.approx(0.4)}
    assert r["hyperparameters"] == {"q": 0.7} and r["environment"]["device"] == "cpu"
    assert r["variant_hash"] == SUITE.variant("sym-0.4").config_hash(SUITE)
    assert "curves" not in r
    with_curves = _get(client, "/api/results?objective=gce&variant=sym-0.4&seed=1&curves=1")
    [record] = with_curves["results"]
    assert record["curves"]["test_acc"] == pytest.approx([0.1, _acc("gce", "sym-0.4", 1)])


def test_results_filters(client, data):
    assert _get(client, "/api/results")["count"] == 4 * 2 * 3 + 2  # finished cells only
    assert _get(client, "/api/results?suite=noisy-labels&seed=0,2")["count"] == 4 * 2 * 2 + 1
    assert _get(client, "/api/results?status=queued")["results"][0]["seed"] == 0
    diverged = _get(client, "/api/results?status=diverged")["results"]
    assert [(r["objective"], r["variant"], r["seed"]) for r in diverged] == [
        ("secret-loss", "sym-0.6", 0)]
    assert _get(client, "/api/results?status=failed,diverged")["count"] == 2
    assert _get(client, f"/api/results?version={data['ce'].id}")["count"] == 6
    assert _get(client, "/api/results?suite_version=0.9")["count"] == 0
    _assert_error(client, "/api/results?seed=one", 400, "seed must be a non-negative integer")
    _assert_error(client, "/api/results?status=done", 400, "unknown status done")
    _assert_error(client, "/api/results?curves=yes please", 400, "curves must be true or false")
    _assert_error(client, "/api/results?objective=nope", 404, "unknown objective 'nope'")


def test_results_pages_are_a_stable_partition(client, data):
    seen, url = [], "/api/results?page_size=5"
    while url:
        page = _get(client, url)
        seen += [r["id"] for r in page["results"]]
        url = page["next"]
    assert seen == sorted(seen) and len(seen) == len(set(seen)) == 4 * 2 * 3 + 2


def test_failure_reason_is_withheld_where_the_code_is_private(client, data, users):
    url = "/api/results?objective=secret-loss&status=failed"
    assert _get(client, url)["results"][0]["error"] is None
    owner = Client()
    owner.force_login(users[0])
    assert SECRET in _get(owner, url)["results"][0]["error"]


def _more_objectives(n: int) -> None:
    for i in range(n):
        _store(_version(f"extra-{i:03d}"), variants=("sym-0.4",))


@pytest.mark.parametrize("url", [
    "/api/results?page_size=200&curves=1",
    "/api/results?suite=noisy-labels&variant=sym-0.4&page_size=200",
    "/api/objectives?page_size=200",
])
def test_query_count_does_not_grow_with_objectives(client, data, url,
                                                   django_assert_max_num_queries):
    with CaptureQueriesContext(connection) as few:
        _get(client, url)
    _more_objectives(30)
    with django_assert_max_num_queries(len(few.captured_queries)):
        body = _get(client, url)
    assert len(body["results"]) > 30
    assert len(few.captured_queries) <= 5


def test_only_get(client):
    response = client.post("/api/suites")
    assert response.status_code == 405 and response.json()["status"] == 405
    assert response["Allow"] == "GET, HEAD"


def test_other_methods_meet_the_405_even_where_csrf_is_enforced():
    """A browser or an API client without a CSRF token: the method answer, not a 403."""
    from django.test import Client

    for method in ("post", "put", "delete", "patch"):
        response = getattr(Client(enforce_csrf_checks=True), method)("/api/results")
        assert response.status_code == 405, (method, response.status_code)
        assert response["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("seeds", ["9223372036854775808", "2147483648", "9" * 5000,
                                   "2147483648,99999999999999999999"])
def test_a_seed_no_cell_can_have_matches_nothing(client, data, seeds):
    """The document allows any digits; the column holds 32 bits: past that, no cell (the
    database never sees the number), and the seeds that can match still do."""
    assert _get(client, f"/api/results?seed={seeds}")["count"] == 0
    assert _get(client, f"/api/results?seed={seeds},0")["count"] == _get(
        client, "/api/results?seed=0")["count"] > 0
    assert _get(client, "/api/results?seed=00")["count"] == _get(
        client, "/api/results?seed=0")["count"]


@pytest.mark.parametrize("query, words", [
    ("seed=-1", "seed must be a non-negative integer"),
    ("seed=1,x", "seed must be a non-negative integer"),
    ("seed=%D9%A1", "seed must be a non-negative integer"),  # an Arabic-Indic one
    ("version=99999999999999999999999999", "version must be between 1 and"),
    ("version=0", "version must be between 1 and"),
])
def test_integers_a_column_cannot_hold_are_a_400_not_a_500(client, data, query, words):
    _assert_error(client, f"/api/results?{query}", 400, words)


def test_every_documented_spelling_of_a_flag_is_accepted(client, data):
    for raw in ("true", "1", "yes"):
        assert _get(client, f"/api/objectives?builtin={raw}")["count"] == 2
    for raw in ("false", "0", "no"):
        assert _get(client, f"/api/objectives?builtin={raw}")["count"] == 2


# ---------------------------------------------------------------- OpenAPI and index
def _resolve_ref(doc: dict, ref: str) -> dict:
    node = doc
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool,
          "null": type(None)}


def _is(value, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def _check(value, schema: dict, doc: dict, where: str = "$") -> None:
    """The subset of JSON Schema the document uses: $ref, anyOf, enum, type, required,
    properties, additionalProperties, items."""
    if "$ref" in schema:
        return _check(value, _resolve_ref(doc, schema["$ref"]), doc, where)
    if "anyOf" in schema:
        errors = []
        for option in schema["anyOf"]:
            try:
                return _check(value, option, doc, where)
            except AssertionError as e:
                errors.append(str(e))
        raise AssertionError(f"{where}: matches no option: {errors}")
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        assert any(_is(value, k) for k in kinds), f"{where}: {value!r} is not {kinds}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, f"{where}: required key {key!r} missing"
        props, extra = schema.get("properties", {}), schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                _check(item, props[key], doc, f"{where}.{key}")
            elif extra is False:
                raise AssertionError(f"{where}: undocumented key {key!r}")
            elif isinstance(extra, dict):
                _check(item, extra, doc, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check(item, schema["items"], doc, f"{where}[{i}]")


def _refs(node):
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"]
        for v in node.values():
            yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_openapi_document_is_consistent(client):
    doc = _get(client, "/api/openapi.json")
    assert doc["openapi"].startswith("3.1") and doc["info"]["title"]
    assert set(doc["paths"]) == {e.path for e in openapi.ENDPOINTS} | {
        o.path for o in openapi.TOKEN_OPERATIONS}
    for ref in set(_refs(doc)):
        assert isinstance(_resolve_ref(doc, ref), dict), ref
    for o in openapi.TOKEN_OPERATIONS:
        item = doc["paths"][o.path][o.method]
        assert resolve(re.sub(r"\{(\w+)\}", "1", o.path)).url_name == o.url_name
        assert item["security"] == [{"token": []}] and str(o.status) in item["responses"]
    for path, item in doc["paths"].items():
        if "get" not in item or path in {o.path for o in openapi.TOKEN_OPERATIONS}:
            continue
        concrete = re.sub(r"\{(\w+)\}", "x", path)
        match = resolve(concrete)
        endpoint = next(e for e in openapi.ENDPOINTS if e.path == path)
        assert match.url_name == endpoint.url_name, path
        declared = set(re.findall(r"\{(\w+)\}", path))
        params = item["get"]["parameters"]
        assert {p["name"] for p in params if p["in"] == "path"} == declared
        assert all(p["required"] for p in params if p["in"] == "path")
        assert "200" in item["get"]["responses"]


def test_every_example_answers_with_the_documented_shape(client, data, users):
    doc = _get(client, "/api/openapi.json")
    values = {"suite": "noisy-labels", "variant": "sym-0.4", "objective": "gce"}
    owner = Client()
    owner.force_login(users[0])
    checked = 0
    for e in openapi.ENDPOINTS:
        assert e.examples, e.path
        ok = doc["paths"][e.path]["get"]["responses"]["200"]["content"]["application/json"]
        for example in e.examples:
            for c in (client, owner):
                _check(_get(c, example.format(**values)), ok["schema"], doc, example)
                checked += 1
    _check(_get(owner, "/api/objectives/secret-loss"),
           {"$ref": "#/components/schemas/ObjectiveProfile"}, doc)
    for url, status in (("/api/suites/nope", 404), ("/api/objectives?page=0", 400)):
        _check(_get(client, url, status), {"$ref": "#/components/schemas/Error"}, doc)
    assert checked >= 2 * len(openapi.ENDPOINTS)


def test_the_index_page_lists_every_endpoint_with_live_examples(client, data):
    response = client.get("/api/")
    assert response.status_code == 200
    html = response.content.decode()
    for e in openapi.ENDPOINTS:
        assert f"GET {e.path}" in html
    assert 'href="/api/suites/noisy-labels?variant=clean"' in html
    assert 'href="/api/openapi.json"' in html
    main = html[html.index("<main"):]
    assert "`" not in main and "<code>" in main  # the descriptions' code spans, not backticks


def test_non_finite_values_are_null_not_nan(client, data):
    store.store_results(data["gce"], SUITE, [CellResult(
        "sym-0.2", 0, "diverged", {"test_acc": float("nan"), "noise_rate": 0.4},
        {"train_loss": [1.0, float("nan")]})], ENV)
    response = client.get("/api/results?variant=sym-0.2&curves=1")
    assert b"NaN" not in response.content
    [record] = response.json()["results"]
    assert record["metrics"] == {"noise_rate": 0.4}  # a non-finite metric is not stored
    assert record["curves"]["train_loss"] == [1.0, None]


def test_the_typed_reason_is_public_and_the_captured_output_never_served(client, data, users):
    store.store_results(data["open-loss"], SUITE, [CellResult(
        "sym-0.6", 2, "killed", error="ran out of memory", reason="memory",
        captured=f"printed {SECRET}")], ENV)
    [record] = _get(client, "/api/results?objective=open-loss&status=killed")["results"]
    assert (record["status"], record["reason"]) == ("killed", "memory")
    owner = Client()
    owner.force_login(users[1])
    for viewer in (client, owner):
        body = viewer.get("/api/results?objective=open-loss&status=killed").content.decode()
        assert SECRET not in body  # stdout/stderr is shown on the owner's run page only
