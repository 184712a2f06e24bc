"""Accounts: sign up (Django's UserCreationForm), then signed in straight away; the account
page (API tokens for ``harness submit``, the user's submissions and uploads).

Log in and log out are Django's own views (see urls.py); log out is a POST.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme

from harness.storage.models import Cell, Submission
from webapp import tokens


def signup(request: HttpRequest) -> HttpResponse:
    next_url = _safe_next(request)
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        login(request, form.save(), backend="django.contrib.auth.backends.ModelBackend")
        return redirect(next_url or resolve_url(settings.LOGIN_REDIRECT_URL))
    return render(request, "webapp/signup.html", {"form": form, "next": next_url})


@login_required
def account(request: HttpRequest) -> HttpResponse:
    """Tokens (make one: shown on this response only, never again; revoke one) and uploads."""
    new_token = None
    if request.method == "POST":
        if "revoke" in request.POST:
            try:
                revoked = tokens.revoke(request.user, int(request.POST["revoke"]))
            except ValueError:
                revoked = False
            if revoked:
                messages.success(request, "Token revoked: it is refused from now on.")
            else:
                messages.error(request, "No such live token of yours.")
            return redirect("account")
        try:  # rendered, not redirected: the token is in this response and nowhere else
            _, new_token = tokens.create(request.user, request.POST.get("name", ""))
        except tokens.TokenError as exc:
            messages.error(request, str(exc))
            return redirect("account")
    response = render(request, "webapp/account.html", {
        "new_token": new_token,
        "tokens": request.user.api_tokens.order_by("-created"),
        "uploads": request.user.uploads.select_related("version").order_by("-created")[:100],
        "submissions": _submissions(request.user),
    })
    response["Cache-Control"] = "no-store"  # it may hold a token
    return response


def _submissions(user) -> list[dict]:
    """The user's newest web submissions, each with its cells counted by status (one
    query): the run page and the objective page whose profile they fill."""
    subs = list(user.submissions.select_related("version__objective").order_by("-created")[:50])
    counts: dict[int, dict[str, int]] = {}
    for sid, status, n in (Submission.cells.through.objects
                           .filter(submission__in=subs)
                           .values_list("submission_id", "cell__status")
                           .annotate(n=Count("id")).order_by()):
        counts.setdefault(sid, {})[status] = n
    out = []
    for sub in subs:
        mine = counts.get(sub.pk, {})
        done = sum(n for st, n in mine.items() if st in Cell.FINISHED)
        out.append({"id": sub.pk, "label": sub.version.label,
                    "slug": sub.version.objective.slug, "suites": sub.suites,
                    "created": sub.created, "total": sum(mine.values()), "done": done,
                    "failed": sum(n for st, n in mine.items()
                                  if st in Cell.FAILURES)})
    return out


def _safe_next(request: HttpRequest) -> str:
    """The ``next`` URL when it points at this site, else empty."""
    url = request.POST.get("next") or request.GET.get("next") or ""
    ok = url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()},
                                         require_https=request.is_secure())
    return url if ok else ""


@staff_member_required
def ops(request: HttpRequest) -> HttpResponse:
    """Staff only: workers, queues and the last 24 hours (webapp/ops.py)."""
    from webapp.ops import snapshot

    return render(request, "webapp/ops.html", {"snap": snapshot()})
