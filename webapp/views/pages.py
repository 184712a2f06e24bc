"""Leaderboard pages: thin handlers over :mod:`webapp.leaderboard`.

Every number on these pages comes from one leaderboard function; views only read GET
parameters, call it and render. Unknown suites, variants and objectives answer a
friendly 404 page.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from harness.contract.registry import builtins, get_suite, suite_names
from harness.storage.models import Objective
from harness.storage.store import slug_for
from webapp import exports, leaderboard, rendered
from webapp.leaderboard import NotFound


def home(request: HttpRequest) -> HttpResponse:
    try:
        body = rendered.home_body(request.GET.get("suite") or None,
                                  request.GET.get("kind") or "all",
                                  request.GET.get("track") or None)
    except NotFound as exc:
        return _not_found(request, exc)
    from webapp.bootstrap import baselines_progress

    return render(request, "webapp/home.html", {  # live, so never in the cached body
        "body": body, "runs": leaderboard.runs_on_board(), "baselines": baselines_progress()})


def suite(request: HttpRequest, name: str) -> HttpResponse:
    try:
        title, body = rendered.suite_body(name, request.GET.get("variant") or None,
                                          kind=request.GET.get("kind") or "all",
                                          show=request.GET.get("show") or "15",
                                          track=request.GET.get("track") or None)
    except NotFound as exc:
        return _not_found(request, exc)
    return render(request, "webapp/suite.html", {**title, "body": body})


def objective(request: HttpRequest, slug: str) -> HttpResponse:
    wanted = {n: request.GET[f"curves-{n}"] for n in suite_names()
              if request.GET.get(f"curves-{n}")}
    try:
        title, body = rendered.objective_body(slug, request.user, curves=wanted,
                                              track=request.GET.get("track") or None)
    except NotFound as exc:
        return _unknown_objective(request, slug, exc)
    return render(request, "webapp/objective.html", {
        "title": title, "body": body,
        "runs": leaderboard.runs_in_progress(slug)})  # live, so never in the cached body


def compare(request: HttpRequest, slug: str) -> HttpResponse:
    other = request.GET.get("with") or ""
    try:
        available = leaderboard.objective_suites(slug)
        name = request.GET.get("suite") or (available[0] if available else "")
        if not other:  # no choice yet: against the suite's reference
            if name not in suite_names():
                raise NotFound(f"no suite {name!r}" if name else
                               f"no results of {slug!r} to compare yet")
            choice = {"with": _default_other(slug, name), "suite": name}
            return redirect(f"{request.path}?{urlencode(choice)}")
        result = leaderboard.compare(slug, other, name)
    except NotFound as exc:
        return _unknown_objective(request, slug, exc)
    return render(request, "webapp/compare.html", {
        "c": result, "suites": available, "others": [
            o for o in leaderboard.objective_choices() if o["slug"] != slug]})


def export(request: HttpRequest, suite: str, fmt: str) -> HttpResponse:
    if fmt not in ("csv", "tex"):
        return _not_found(request, NotFound(f"no export format {fmt!r} (csv, tex)"))
    variant = request.GET.get("variant") or None
    try:
        suite_obj, tables = leaderboard.export_tables(suite, variant,
                                                      request.GET.get("track") or None)
    except NotFound as exc:
        return _not_found(request, exc)
    stem = f"{suite_obj.name}-{suite_obj.version}" + (
        f"-{variant.replace('/', '_')}" if variant else "")
    if fmt == "csv":
        response = HttpResponse(exports.tables_csv(tables),
                                content_type="text/csv; charset=utf-8")
    else:
        try:
            body = exports.tables_latex(suite_obj, tables,
                                        interval=request.GET.get("ci") == "interval")
        except ValueError as exc:  # nothing stored yet: no table to paste
            return _not_found(request, NotFound(
                f"{exc}: `harness run suite {suite_obj.name}"
                + (" --tuned" if suite_obj.track != "defaults" else "")
                + "` or a submission fills it"))
        response = HttpResponse(body, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{stem}.{fmt}"'
    return response


def export_scores(request: HttpRequest) -> HttpResponse:
    """The home page's ranking as CSV (``?kind=`` and ``?track=`` as on the page)."""
    track = request.GET.get("track") or "defaults"
    try:
        board = leaderboard.home_table(kind=request.GET.get("kind") or "all", track=track)
    except NotFound as exc:
        return _not_found(request, exc)
    response = HttpResponse(exports.scores_csv(board, track),
                            content_type="text/csv; charset=utf-8")
    stem = "scores" if track == "defaults" else f"scores-{track}"
    response["Content-Disposition"] = f'inline; filename="{stem}.csv"'
    return response


def _default_other(slug: str, suite_name: str) -> str:
    """Whom ``slug`` is compared with when nobody chose: the suite's reference, or, for the
    reference itself, the first other objective with results."""
    reference = slug_for(get_suite(suite_name).reference)
    if reference != slug:
        return reference
    return next((o["slug"] for o in leaderboard.objective_choices() if o["slug"] != slug), slug)


def _unknown_objective(request: HttpRequest, slug: str, exc: NotFound) -> HttpResponse:
    """A 404 that helps: ``ldr_kl`` is redirected to the stored ``ldr-kl``; a built-in that
    ``harness ls`` lists but nobody has run here says how to get its results. An objective
    that exists but is not the viewer's to see stays a plain 404."""
    if Objective.objects.filter(slug=slug).exists():
        return _not_found(request, exc)
    canonical = leaderboard.stored_slug_of(slug)
    if canonical:
        target = request.path.replace(f"/{slug}/", f"/{canonical}/", 1)
        query = request.META.get("QUERY_STRING")
        return redirect(f"{target}?{query}" if query else target, permanent=True)
    builtin = next((b for b in builtins().values() if slug_for(b.name) == slug_for(slug)),
                   None)
    if builtin is not None:
        where = (f"`harness run suite {builtin.suite} -o {builtin.name}`" if builtin.suite
                 else f"`harness profile {builtin.name}` (every suite it fits)")
        exc = NotFound(f"{builtin.name} is a built-in objective with no results here yet: "
                       f"{where} trains it, and `make full` every baseline")
    return _not_found(request, exc)


def _not_found(request: HttpRequest, exc: Exception) -> HttpResponse:
    return render(request, "webapp/not_found.html", {"message": str(exc)}, status=404)
