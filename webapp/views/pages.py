"""Leaderboard pages: thin handlers over :mod:`webapp.leaderboard`.

Every number on these pages comes from one leaderboard function; views only read GET
parameters, call it and render. Unknown suites, variants and objectives answer a
friendly 404 page.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from harness.registry import get_suite, suite_names
from webapp import exports, leaderboard
from webapp.leaderboard import NotFound
from webapp.leaderboard.heldout import held_out_columns
from webapp.leaderboard.lookup import with_values
from webapp.leaderboard.variance import variance_sources

SHOW_CHOICES = ("15", "30", "all")


def home(request: HttpRequest) -> HttpResponse:
    suite = request.GET.get("suite") or None
    kind = request.GET.get("kind") or "all"
    try:
        board = leaderboard.home_table(suite=suite, kind=kind)
    except NotFound as exc:
        return _not_found(request, exc)
    return render(request, "webapp/home.html", {
        "board": board, "suite_choices": suite_names(), "kinds": leaderboard.KINDS})


def suite(request: HttpRequest, name: str) -> HttpResponse:
    kind = request.GET.get("kind") or "all"
    show = request.GET.get("show") if request.GET.get("show") in SHOW_CHOICES else "15"
    try:
        page = leaderboard.suite_page(name, request.GET.get("variant") or None, kind=kind,
                                      limit=None if show == "all" else int(show))
    except NotFound as exc:
        return _not_found(request, exc)
    table = page["table"]
    return render(request, "webapp/suite.html", {
        **page, "rows": table["rows"], "kind": kind, "show": show, "kinds": leaderboard.KINDS,
        "show_choices": SHOW_CHOICES, "hidden": page["total_rows"] - len(table["rows"]),
        "filter_hidden": [("variant", page["variant"])],
        "secondary": with_values(table["table_specs"], table["rows"]),
        "min_seeds": get_suite(page["suite"]["suite"]).min_seeds,
        "variance": variance_sources(name, page["variant"]),
        "held_out": held_out_columns(get_suite(name), page["across"]["rows"]),
    })


def objective(request: HttpRequest, slug: str) -> HttpResponse:
    wanted = {n: request.GET[f"curves-{n}"] for n in suite_names()
              if request.GET.get(f"curves-{n}")}
    try:
        profile = leaderboard.objective_profile(slug, request.user, curves=wanted)
    except NotFound as exc:
        return _not_found(request, exc)
    for s in profile["suites"]:
        s["family"] = leaderboard.family_plot(
            s["series"], list(s["series"]["series"]), metric=s["headline_label"],
            spec=s["headline_spec"])
        s["secondary"] = with_values(s["table_specs"], s["rows"])
        s["curve_variant"] = next(iter(s["curves"]), None)
        s["multi_label"] = len({r["objective"] for r in s["rows"]}) > 1
    return render(request, "webapp/objective.html", {
        "o": profile, "others": [o for o in leaderboard.objective_choices()
                                 if o["slug"] != slug]})


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


def _not_found(request: HttpRequest, exc: Exception) -> HttpResponse:
    return render(request, "webapp/not_found.html", {"message": str(exc)}, status=404)
