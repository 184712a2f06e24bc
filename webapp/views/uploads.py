"""Uploaded local results: the token-authenticated API (``harness submit`` posts here) and
the upload page. Checks live in :mod:`webapp.uploads`, verification in
:mod:`webapp.verification`; these views connect them to requests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from harness.storage.models import Upload
from webapp import tokens, uploads, verification
from webapp.views.json_api import _error, _json

STATUS_WORDS = {
    Upload.PENDING: "pending: the server is re-running a sample of your seeds",
    Upload.VERIFIED: "verified: the server's re-run matched your numbers exactly",
    Upload.MISMATCH: "mismatch: the server's re-run gave different numbers",
    Upload.UNVERIFIABLE: "cannot be verified",
}


def _authenticated(request: HttpRequest):
    try:
        return tokens.user_for(request.headers.get("Authorization")), None
    except tokens.TokenError as exc:
        response = _error(401, str(exc))
        response["WWW-Authenticate"] = 'Bearer realm="harness"'
        return None, response


def _not_allowed(request: HttpRequest, allowed: str) -> HttpResponse:
    response = _error(405, f"method {request.method} not allowed here (allowed: {allowed})")
    response["Allow"] = allowed
    return response


def token_view(*methods: str) -> Callable:
    """A view for ``Bearer`` token holders, called with the token's user: another method
    is a 405 naming ``methods``, a missing or bad token a 401. CSRF-exempt: a token, not a
    cookie, authenticates it, so no cross-site request can forge one."""
    allowed = ", ".join(methods)

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @csrf_exempt
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if request.method not in methods:
                return _not_allowed(request, allowed)
            user, refused = _authenticated(request)
            if refused:
                return refused
            return view(request, user, *args, **kwargs)
        return wrapper
    return decorate


@token_view("POST")
def create(request: HttpRequest, user) -> HttpResponse:
    """POST /api/uploads: a JSON body (``webapp.uploads.parse``), ``Bearer`` token."""
    limit = settings.MAX_UPLOAD_BYTES
    try:
        length = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        return _error(400, "Content-Length must be an integer")
    if length > limit:  # refused before the body is read
        return _error(413, f"the upload is {length} bytes; the limit is {limit} bytes")
    if request.content_type != "application/json":
        return _error(415, "send the upload as application/json")
    try:
        raw = request.body
    except RequestDataTooBig:  # Django's own ceiling (DATA_UPLOAD_MAX_MEMORY_SIZE)
        return _error(413, f"the upload is larger than the limit of {limit} bytes")
    if len(raw) > limit:
        return _error(413, f"the upload is {len(raw)} bytes; the limit is {limit} bytes")
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        return _error(400, f"the body is not JSON: {exc}")
    except RecursionError:
        return _error(400, "the body is nested too deeply")
    try:
        upload = uploads.accept(user, uploads.parse(body))
    except uploads.UploadError as exc:
        return _error(exc.status, exc.message)
    return _json(payload(upload), status=201)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


@token_view("GET", "HEAD")
def detail(request: HttpRequest, user, pk: str) -> HttpResponse:
    """GET /api/uploads/{id}: the upload's state, for its owner (``Bearer`` token)."""
    upload = Upload.objects.filter(pk=int(pk), owner=user).first() if len(pk) < 19 else None
    if upload is None:
        return _error(404, f"you have no upload {pk}")
    verification.settle(upload.pk)  # a sample finished while no worker settled it
    upload.refresh_from_db()
    return _json(payload(upload))


VERSION_KEY = re.compile(r"[0-9a-f]{64}")


@token_view("GET", "HEAD")
def row_key(request: HttpRequest, user, version_key: str) -> HttpResponse:
    """GET /api/row-keys/{version_key}: this server's row-order key for that version."""
    if not VERSION_KEY.fullmatch(version_key):
        return _error(400, "version_key must be 64 lowercase hex digits (a sha256)")
    from harness.sandbox.remote import version_row_key

    return _json({"version_key": version_key,
                  "row_key": version_row_key(version_key).decode()})


@token_view("GET", "HEAD")
def quota(request: HttpRequest, user) -> HttpResponse:
    """GET /api/quota: the token holder's held-out runs left in the last 24 hours
    (webapp/quota.py); ``held_out_variants``: whether this server runs any."""
    from harness.contract import heldout
    from webapp.quota import allowance

    return _json({**allowance(user).to_json(), "held_out_variants": heldout.available()})


def payload(upload: Upload) -> dict:
    claimed = list(upload.claimed.values_list("variant", "seed", "sampled"))
    return {
        "id": upload.pk, "status": upload.status, "status_text": STATUS_WORDS[upload.status],
        "reason": upload.reason, "objective": upload.version.objective.slug,
        "version_id": upload.version_id, "version_label": upload.version.label,
        "suite": upload.suite, "suite_version": upload.suite_version,
        "cells": len(claimed),
        "sample": [{"variant": v, "seed": s} for v, s, sampled in sorted(claimed) if sampled],
        "differences": upload.differences,
        "url": reverse("upload", args=[upload.pk]),
        "run_url": reverse("run-status", args=[upload.sample_id]),
    }


@require_safe
def page(request: HttpRequest, pk: int) -> HttpResponse:
    """The upload's page: its owner sees it in every state, others once it is verified."""
    upload = get_object_or_404(Upload.objects.select_related("version__objective", "owner"),
                               pk=pk)
    owner = request.user.is_authenticated and request.user.pk == upload.owner_id
    if upload.status == Upload.PENDING:
        verification.settle(upload.pk)
        upload.refresh_from_db()
    if not owner and upload.status != Upload.VERIFIED:
        raise Http404("no such upload")
    return render(request, "webapp/upload.html", {
        "upload": upload, "info": payload(upload), "is_owner": owner,
        "status_text": STATUS_WORDS[upload.status], "fraction": verification.fraction()})
