"""Request middleware: a request id on every request and its log lines; a request body
over Django's ceiling answered in words, before the CSRF check reads it.

``CsrfViewMiddleware`` reads ``request.POST`` for its token; a body over
``DATA_UPLOAD_MAX_MEMORY_SIZE`` raises there, before any view, and Django answered a bare
"Bad Request (400)" that lost the form. This middleware, placed before it, reads the body
first: over the ceiling, a view that says how to answer (``view.too_large(request)``)
answers, any other a 413 page. Nothing is done with such a request, so no CSRF token is
needed to refuse it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class RequestTooLargeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view: Callable[..., Any], args: Any,
                     kwargs: Any) -> HttpResponse | None:
        if request.method != "POST":
            return None
        try:
            request.POST  # noqa: B018 -- parsed here, so the ceiling is met here
        except RequestDataTooBig:
            answer = getattr(view, "too_large", None)
            if answer is not None:
                return answer(request)
            return render(request, "webapp/400.html", {
                "title": "The request is too large",
                "reason": f"This server reads at most "
                          f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 2 ** 20} MB per request. "
                          f"Nothing was changed."}, status=413)
        return None


class RequestIdMiddleware:
    """First in the chain: the request's id (a proxy's ``X-Request-ID`` when it is plain,
    else a new one) on ``request.request_id``, on every log line of the request
    (:mod:`webapp.logs`), on the response's ``X-Request-ID`` and on the 500 page, so an
    operator finds the traceback a user saw."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        from webapp import logs

        request.request_id = (logs.plain_id(request.headers.get("X-Request-ID"))
                              or uuid.uuid4().hex[:16])
        token = logs.bind(request)
        try:
            response = self.get_response(request)
        finally:
            logs.unbind(token)
        response["X-Request-ID"] = request.request_id
        return response
