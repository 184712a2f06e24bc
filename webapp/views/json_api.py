"""Read-only JSON API: suites, objectives, per-seed results, and its OpenAPI schema.

Thin views: tables come from ``webapp.leaderboard`` (cached there), rows from the
models with a fixed number of queries per request whatever the page size. Errors are
JSON ``{"error": message, "status": code}``, never a stack trace. Private code is
only ever returned to its owner. The endpoints are described once, in
``webapp.openapi``; the index page and ``/api/openapi.json`` render that.
"""

from __future__ import annotations

import decimal
import json
import logging
import math
from collections.abc import Callable
from functools import wraps
from urllib.parse import urlencode

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path, re_path, reverse
from django.views.decorators.csrf import csrf_exempt

from harness.contract import registry
from harness.contract.suite import Suite
from harness.report.jsonsafe import finite_or_none
from harness.report.textsafe import is_storable
from harness.storage import store
from harness.storage.models import Cell, Curve, Metric, Objective, ObjectiveVersion
from webapp import leaderboard, openapi
from webapp.leaderboard.lookup import NotFound, suite_of

logger = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


# ---------------------------------------------------------------- responses
class RawJSON(str):
    """A payload value that is JSON already (a cached page of tables): written as it is."""


def _json(payload, status: int = 200) -> HttpResponse:
    options = {"cls": DjangoJSONEncoder, "allow_nan": False, "ensure_ascii": False,
               "separators": (",", ":")}
    raw = ({k: v for k, v in payload.items() if isinstance(v, RawJSON)}
           if isinstance(payload, dict) else {})
    rest = {k: v for k, v in payload.items() if k not in raw} if raw else payload
    try:  # leaderboard payloads are NaN-free already: no second walk over megabytes
        body = json.dumps(rest, **options)
    except ValueError:
        body = json.dumps(finite_or_none(rest), **options)
    if raw:  # spliced in as the object's last members
        members = ",".join(f"{json.dumps(k)}:{v}" for k, v in raw.items())
        body = body[:-1] + ("," if rest else "") + members + "}"
    return HttpResponse(body, status=status, content_type="application/json")


def _error(status: int, message: str) -> HttpResponse:
    return _json({"error": message, "status": status}, status=status)


def api_view(view: Callable[..., object]) -> Callable[..., HttpResponse]:
    """GET/HEAD only; the view returns a payload or raises ApiError; nothing leaks.
    Exempt from CSRF: it changes nothing, and a POST must meet the 405 below, not the
    CSRF middleware's 403."""

    @csrf_exempt
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            response = _error(405, f"method {request.method} not allowed: the API is read-only")
            response["Allow"] = "GET, HEAD"
            return response
        try:
            return _json(view(request, *args, **kwargs))
        except ApiError as e:
            return _error(e.status, e.message)
        except Exception:
            logger.exception("API request %s failed", request.get_full_path())
            return _error(500, "internal error; it has been logged")

    return wrapper


# ---------------------------------------------------------------- parameters
def _suite(name: str) -> Suite:
    try:
        return registry.get_suite(name)
    except KeyError:
        raise ApiError(404, f"unknown suite {name!r} (suites: "
                       f"{', '.join(registry.suite_names())})") from None


def _track(request: HttpRequest) -> str:
    track = request.GET.get("track") or "defaults"
    if track not in ("defaults", "tuned"):
        raise ApiError(400, f"track is defaults or tuned, got {track!r}")
    return track


def _variants(suite: Suite, names: list[str]) -> list[str]:
    known = {v.name for v in suite.variants}
    for name in names:
        if name not in known:
            raise ApiError(404, f"suite {suite.name!r} has no variant {name!r} "
                           f"(variants: {', '.join(v.name for v in suite.variants)})")
    return names


def _listed(request: HttpRequest, name: str) -> list[str]:
    """A parameter given repeatedly and/or comma-separated, as a list."""
    return [v.strip() for raw in request.GET.getlist(name) for v in raw.split(",") if v.strip()]


ID_MAX = 2 ** 63 - 1  # a BigAutoField id
SEED_MAX = 2 ** 31 - 1  # Cell.seed, an IntegerField


def _int(request: HttpRequest, name: str, default: int, low: int, high: int = ID_MAX) -> int:
    raw = request.GET.get(name)
    if raw is None or raw == "":
        return default
    return _bounded(name, raw, low, high)


def _bounded(name: str, raw: str, low: int, high: int) -> int:
    """``raw`` as an integer in [low, high]: a value the database column cannot hold is a
    400 here, not the database's error (a 500)."""
    try:  # JSON Schema's integers include 30.0 and 3e1: any integral decimal is one
        number = decimal.Decimal(raw.strip())
        integral = number.is_finite() and number == number.to_integral_value()
    except (decimal.InvalidOperation, ValueError):
        integral = False
    if not integral:
        raise ApiError(400, f"{name} must be an integer, got {raw!r}")
    if not low <= number <= high:  # compared before int(): 1e999999999 stays a Decimal
        raise ApiError(400, f"{name} must be between {low} and {high}, got {raw.strip()}")
    return int(number)


def _seeds(raw: list[str]) -> list[int]:
    """Seeds as the document allows them (any run of ASCII digits); one past what the
    column holds is a seed no cell has: it matches nothing, it is not an error, and it
    never reaches the database."""
    seeds = []
    for s in raw:
        if not (s.isascii() and s.isdigit()):
            raise ApiError(400, f"seed must be a non-negative integer, got {s!r}")
        digits = s.lstrip("0") or "0"
        if len(digits) <= 10 and int(digits) <= SEED_MAX:
            seeds.append(int(digits))
    return seeds


def _flag(request: HttpRequest, name: str) -> bool | None:
    raw = request.GET.get(name)
    if raw is None or raw == "":
        return None
    if raw in ("1", "true", "yes"):  # exactly the document's spellings
        return True
    if raw in ("0", "false", "no"):
        return False
    raise ApiError(400, f"{name} must be true or false (true, 1, yes; false, 0, no), got "
                        f"{raw!r}")


def _page(request: HttpRequest, queryset, serialize: Callable[[object], dict]) -> dict:
    """One page of ``queryset`` (already ordered) as {count, page, ..., results}."""
    window = _window(request, openapi.PAGE_SIZE_DEFAULT, openapi.PAGE_SIZE_MAX)
    count = queryset.count()
    items = list(queryset[window]) if window.start < count else []
    return {**_page_meta(request, count, window), "results": [serialize(i) for i in items]}


def _window(request: HttpRequest, default: int, most: int) -> slice:
    """The items the request's ``page`` and ``page_size`` (default, at most ``most``) ask for."""
    page = _int(request, "page", 1, 1)
    size = _int(request, "page_size", default, 1, most)
    return slice((page - 1) * size, page * size)


def _page_meta(request: HttpRequest, count: int, window: slice) -> dict:
    """{count, page, page_size, pages, next, previous} of ``window`` over ``count`` items."""
    size = window.stop - window.start
    page = window.start // size + 1
    pages = max(1, math.ceil(count / size))

    def link(number: int) -> str:
        query = request.GET.copy()
        query["page"] = str(number)
        return f"{request.path}?{urlencode(sorted(query.lists()), doseq=True)}"

    return {"count": count, "page": page, "page_size": size, "pages": pages,
            "next": link(page + 1) if page < pages else None,
            "previous": link(min(page - 1, pages)) if page > 1 else None}


def _may_see_code(objective: Objective, user) -> bool:
    return objective.visibility == Objective.PUBLIC or (
        user.is_authenticated and objective.owner_id == user.pk)


def _without_code(value):
    """The payload with every ``code`` key removed, at any depth."""
    if isinstance(value, dict):
        return {k: _without_code(v) for k, v in value.items() if k != "code"}
    if isinstance(value, list):
        return [_without_code(v) for v in value]
    return value


# ---------------------------------------------------------------- serializers
def suite_payload(suite: Suite) -> dict:
    """A suite's declaration: what its numbers mean (direction, unit), how they are drawn."""
    anchors = suite.headline_anchors
    return {
        "name": suite.name, "version": suite.version, "hooks": list(suite.hooks),
        "lifts": list(suite.lifts), "description": suite.description,
        "headline": suite.headline, "reference": suite.reference,
        "baselines": list(suite.baselines),
        "anchors": {"worst": anchors.worst, "best": anchors.best},
        "metrics": [m.to_json() for m in suite.metrics],
        "curves": [c.to_json() for c in suite.curves],
        "scatters": [{"x": sc.x, "y": sc.y} for sc in suite.scatters],
        "reliability": None if suite.reliability is None else {
            "confidence": suite.reliability.confidence,
            "accuracy": suite.reliability.accuracy, "count": suite.reliability.count,
            "label": suite.reliability.label},
        "variant_axis": None if suite.variant_axis is None else {
            "key": suite.variant_axis.key, "label": suite.variant_axis.label,
            "unit": suite.variant_axis.unit},
        "variants": [{"name": v.name, "description": v.description, "config": dict(v.config),
                      "default": v.default, "queue": v.queue} for v in suite.variants],
        "settings": dict(suite.settings),
        "url": reverse("api-suite", args=[suite.name]),
    }


def _objective(o: Objective) -> dict:
    return {
        "slug": o.slug, "name": o.name, "description": o.description,
        "paper_url": o.paper_url, "builtin": o.is_builtin,
        "owner": o.owner.username if o.owner else None,
        "visibility": o.visibility, "created": o.created,
        "url": reverse("api-objective", args=[o.slug]),
        "versions": [{"id": v.id, "label": v.label, "code_sha256": v.code_sha256,
                      "hyperparameters": v.hyperparameters, "created": v.created}
                     for v in o.versions.all()],
    }


RESULT_FIELDS = ("id", "version_id", "suite", "suite_version", "variant", "variant_hash", "seed",
                 "status", "reason", "attempts", "diverged_step", "wall_time", "finished_at",
                 "environment", "error", "version__label", "version__code_sha256",
                 "version__hyperparameters", "version__objective__slug",
                 "version__objective__visibility", "version__objective__owner_id")


def _results_page(request: HttpRequest, cells, curves: bool) -> dict:
    """A page of cells as tidy records: the cells with their version and objective in one
    query, then all their metrics (and curves) in one query each, whatever the page size."""
    user = request.user
    page = _page(request, cells.values(*RESULT_FIELDS), lambda c: c)
    ids = [c["id"] for c in page["results"]]
    metrics: dict[int, dict[str, float]] = {i: {} for i in ids}
    curve_values: dict[int, dict[str, list]] = {i: {} for i in ids}
    if ids:
        for cell_id, name, value in Metric.objects.filter(cell_id__in=ids).order_by(
                "cell_id", "name").values_list("cell_id", "name", "value"):
            metrics[cell_id][name] = value
        if curves:
            for cell_id, name, values in Curve.objects.filter(cell_id__in=ids).order_by(
                    "cell_id", "name").values_list("cell_id", "name", "values"):
                curve_values[cell_id][name] = values
    records = []
    for c in page["results"]:
        visible = c["version__objective__visibility"] == Objective.PUBLIC or (
            user.is_authenticated and c["version__objective__owner_id"] == user.pk)
        record = {
            "id": c["id"], "objective": c["version__objective__slug"],
            "version_id": c["version_id"], "version_label": c["version__label"],
            "code_sha256": c["version__code_sha256"],
            "hyperparameters": c["version__hyperparameters"],
            **{k: c[k] for k in ("suite", "suite_version", "variant", "variant_hash", "seed",
                                 "status", "reason", "attempts", "diverged_step", "wall_time",
                                 "finished_at", "environment")},
            # A failure message can quote the objective's source: only for who may see it.
            "error": c["error"] if visible else None,
            "metrics": metrics[c["id"]],
        }
        if curves:
            record["curves"] = curve_values[c["id"]]
        records.append(record)
    return {**page, "results": records}


# ---------------------------------------------------------------- views
def index(request: HttpRequest) -> HttpResponse:
    """The endpoints, with example requests filled from live data."""
    suite = registry.all_suites()[0]
    values = {"suite": suite.name,
              "variant": (suite.default_variants or [v.name for v in suite.variants])[0],
              "objective": suite.reference}
    endpoints = [{"path": e.path, "summary": e.summary, "description": e.description,
                  "params": e.params, "errors": e.errors,
                  "examples": [x.format(**values) for x in e.examples]}
                 for e in openapi.ENDPOINTS]
    return render(request, "webapp/api_index.html",
                  {"endpoints": endpoints, "example": values,
                   "token_operations": openapi.TOKEN_OPERATIONS,
                   "page_size_max": openapi.PAGE_SIZE_MAX})


@api_view
def suite_list(request: HttpRequest) -> dict:
    return {"suites": [suite_payload(s) for s in registry.all_suites()]}


@api_view
def suite_detail(request: HttpRequest, name: str) -> dict:
    """A page of the suite's variant tables: only that page's tables are read or built,
    so an answer costs the same whatever the number of variants."""
    suite = _suite(name)
    track = _track(request)
    if track != "defaults":
        try:
            suite = suite_of(suite, track)
        except NotFound as exc:
            raise ApiError(404, str(exc)) from None
    window = _window(request, openapi.TABLE_PAGE_SIZE_DEFAULT, openapi.TABLE_PAGE_SIZE_MAX)
    variants, tables = leaderboard.table_page_json(
        suite, _variants(suite, _listed(request, "variant")) or None, window)
    return {"suite": suite_payload(suite), **_page_meta(request, len(variants), window),
            "tables": RawJSON(tables)}


SCORE_FIELDS = ("objective", "slug", "is_builtin", "score", "score_low", "score_high",
                "score_n", "coverage", "rank", "rank_low", "rank_high", "rank_of", "tied")


@api_view
def scores(request: HttpRequest) -> dict:
    kind = request.GET.get("kind") or "all"
    if kind not in leaderboard.KINDS:
        raise ApiError(400, f"kind is one of {', '.join(leaderboard.KINDS)}, got {kind!r}")
    track = _track(request)
    try:
        board = leaderboard.home_table(kind=kind, track=track)
    except NotFound as exc:
        raise ApiError(400, str(exc)) from None
    return {"rank_method": board["rank_method"], "track": track,
            "rows": [{k: r[k] for k in SCORE_FIELDS} for r in board["rows"]]}


@api_view
def objective_list(request: HttpRequest) -> dict:
    objectives = (Objective.objects.select_related("owner").order_by("slug")
                  .exclude(pk__in=store.unlisted_objectives(request.user)))
    builtin = _flag(request, "builtin")
    if builtin is not None:
        objectives = objectives.filter(is_builtin=builtin)
    versions = ObjectiveVersion.objects.defer("code").order_by("created", "id")
    return _page(request, objectives.prefetch_related(Prefetch("versions", queryset=versions)),
                 _objective)


@api_view
def objective_detail(request: HttpRequest, slug: str) -> dict:
    try:
        objective = Objective.objects.only("slug", "visibility", "owner_id").get(slug=slug)
    except Objective.DoesNotExist:
        canonical = leaderboard.stored_slug_of(slug)  # a name where the URL wants the slug
        hint = f"; objectives are addressed by slug: /api/objectives/{canonical}" \
            if canonical else ""
        raise ApiError(404, f"unknown objective {slug!r}{hint}") from None
    curves = "all" if _flag(request, "curves") else None
    try:
        profile = leaderboard.objective_profile(slug, request.user, curves=curves)
    except leaderboard.NotFound as e:
        raise ApiError(404, str(e)) from None
    # The profile withholds private code itself; this check is independent of it.
    return profile if _may_see_code(objective, request.user) else _without_code(profile)


@api_view
def results(request: HttpRequest) -> dict:
    cells = Cell.objects.exclude(store.held_out_cells())  # their draws are the secret's
    suite_name = request.GET.get("suite")
    variants = _listed(request, "variant")
    if suite_name:
        suite = _suite(suite_name)
        _variants(suite, variants)
        cells = cells.filter(suite=suite.name)
    # A value no text column can hold (a NUL) is in no row: it matches nothing, and never
    # reaches the database, whose error would be a 500.
    if request.GET.get("suite_version"):
        version = request.GET["suite_version"]
        cells = cells.filter(suite_version=version) if is_storable(version) else cells.none()
    if variants:
        cells = cells.filter(variant__in=[v for v in variants if is_storable(v)])
    if request.GET.get("objective"):
        slug = request.GET["objective"]
        if not is_storable(slug) or not Objective.objects.filter(slug=slug).exists():
            raise ApiError(404, f"unknown objective {slug!r}")
        cells = cells.filter(version__objective__slug=slug)
    if request.GET.get("version"):
        cells = cells.filter(version_id=_int(request, "version", 0, 1))
    seeds = _listed(request, "seed")
    if seeds:
        cells = cells.filter(seed__in=_seeds(seeds))
    statuses = _listed(request, "status") or list(openapi.FINISHED)
    unknown = sorted(set(statuses) - set(openapi.STATUSES))
    if unknown:
        raise ApiError(400, f"unknown status {', '.join(unknown)} "
                       f"(statuses: {', '.join(openapi.STATUSES)})")
    cells = cells.filter(status__in=statuses)
    return _results_page(request, cells.order_by("id"), _flag(request, "curves") or False)


@api_view
def openapi_json(request: HttpRequest) -> dict:
    return openapi.schema()


@api_view
def not_found(request: HttpRequest, rest: str = "") -> dict:
    raise ApiError(404, f"no API endpoint at {request.path}; see {reverse('api-openapi')}")


# Both /api/suites and /api/suites/ answer; anything else under /api/ is a JSON 404.
urlpatterns = [
    path("", index, name="api-index"),
    re_path(r"^suites/?$", suite_list, name="api-suites"),
    re_path(r"^suites/(?P<name>[^/]+)/?$", suite_detail, name="api-suite"),
    re_path(r"^scores/?$", scores, name="api-scores"),
    re_path(r"^objectives/?$", objective_list, name="api-objectives"),
    re_path(r"^objectives/(?P<slug>[-\w]+)/?$", objective_detail, name="api-objective"),
    re_path(r"^results/?$", results, name="api-results"),
    path("openapi.json", openapi_json, name="api-openapi"),
    re_path(r"^(?P<rest>[\s\S]*)$", not_found),  # newlines too: "." stops at one
]
