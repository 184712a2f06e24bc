"""Accounts: sign up (Django's UserCreationForm), then signed in straight away.

Log in and log out are Django's own views (see urls.py); log out is a POST.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme


def signup(request: HttpRequest) -> HttpResponse:
    next_url = _safe_next(request)
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        login(request, form.save(), backend="django.contrib.auth.backends.ModelBackend")
        return redirect(next_url or resolve_url(settings.LOGIN_REDIRECT_URL))
    return render(request, "webapp/signup.html", {"form": form, "next": next_url})


def _safe_next(request: HttpRequest) -> str:
    """The ``next`` URL when it points at this site, else empty."""
    url = request.POST.get("next") or request.GET.get("next") or ""
    ok = url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()},
                                         require_https=request.is_secure())
    return url if ok else ""
