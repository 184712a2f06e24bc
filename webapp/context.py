"""What every page needs to say about the board itself: where its draws come from."""

from __future__ import annotations

from django.http import HttpRequest

from harness.contract import draws


def board(request: HttpRequest) -> dict[str, object]:
    """``draws``: "public", or the fingerprint of the key this server's cells are drawn from
    (the footer says which, so that nobody compares a local run's numbers with them)."""
    return {"draws": draws.fingerprint()}
