"""Leaderboard pages: thin handlers over :mod:`webapp.leaderboard`.

Every number on these pages comes from one leaderboard function; views only read GET
parameters, call it and render. Unknown suites, variants and objectives answer a
friendly 404 page.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from harness.contract.registry import suite_names
from webapp import exports, leaderboard, rendered
from webapp.leaderboard import NotFound


def home(request: HttpRequest) -> HttpResponse:
    try:
        body = rendered.home_body(request.GET.get("suite") or None,
                                  request.GET.get("kind") or "all")
    except NotFound as exc:
        return _not_found(request, exc)
    return render(request, "webapp/home.html", {"body": body})


def suite(request: HttpRequest, name: str) -> HttpResponse:
    try:
        title, body = rendered.suite_body(name, request.GET.get("variant") or None,
                                          kind=request.GET.get("kind") or "all",
                                          show=request.GET.get("show") or "15")
    except NotFound as exc:
        return _not_found(request, exc)
    return render(request, "webapp/suite.html", {**title, "body": body})


def objective(request: HttpRequest, slug: str) -> HttpResponse:
    wanted = {n: request.GET[f"curves-{n}"] for n in suite_names()
              if request.GET.get(f"curves-{n}")}
    try:
        title, body = rendered.objective_body(slug, request.user, curves=wanted)
    except NotFound as exc:
        return _not_found(request, exc)
    return render(request, "webapp/objective.html", {"title": title, "body": body})


def compare(request: HttpRequest, slug: str) -> HttpResponse:
    other = request.GET.get("with") or ""
    try:
        available = leaderboard.objective_suites(slug)
        name = request.GET.get("suite") or (available[0] if available else "")
        if not other:
            raise NotFound("choose an objective to compare with (?with=slug)")
        result = leaderboard.compare(slug, other, name)
    except NotFound as exc:
        return _not_found(request, exc)
    return render(request, "webapp/compare.html", {
        "c": result, "suites": available, "others": [
            o for o in leaderboard.objective_choices() if o["slug"] != slug]})


def export(request: HttpRequest, suite: str, fmt: str) -> HttpResponse:
    if fmt not in ("csv", "tex"):
        return _not_found(request, NotFound(f"no export format {fmt!r} (csv, tex)"))
    variant = request.GET.get("variant") or None
    try:
        suite_obj, tables = leaderboard.export_tables(suite, variant)
    except NotFound as exc:
        return _not_found(request, exc)
    stem = f"{suite_obj.name}-{suite_obj.version}" + (
        f"-{variant.replace('/', '_')}" if variant else "")
    if fmt == "csv":
        response = HttpResponse(exports.tables_csv(tables),
                                content_type="text/csv; charset=utf-8")
    else:
        body = exports.tables_latex(suite_obj, tables,
                                        interval=request.GET.get("ci") == "interval")
        response = HttpResponse(body, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{stem}.{fmt}"'
    return response


def export_scores(request: HttpRequest) -> HttpResponse:
    """The home page's ranking as CSV (``?kind=`` as on the page)."""
    try:
        board = leaderboard.home_table(kind=request.GET.get("kind") or "all")
    except NotFound as exc:
        return _not_found(request, exc)
    response = HttpResponse(exports.scores_csv(board), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'inline; filename="scores.csv"'
    return response


def _not_found(request: HttpRequest, exc: Exception) -> HttpResponse:
    return render(request, "webapp/not_found.html", {"message": str(exc)}, status=404)
