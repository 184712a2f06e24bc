"""The 500 page: said plainly, with the request id the operator's log line carries."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseServerError
from django.template import loader


def server_error(request: HttpRequest) -> HttpResponseServerError:
    """Rendered without the context processors or the database, either of which may be
    what failed."""
    request_id = getattr(request, "request_id", None)
    html = loader.get_template("500.html").render({"request_id": request_id})
    return HttpResponseServerError(html)
