"""API tokens: made on the account page, shown once, stored as a hash, revocable.

A token reads ``oh_`` + 43 URL-safe characters (256 random bits). The server keeps its
sha256 only; a request shows it as ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hashlib
import secrets

from django.db.models import Q
from django.utils import timezone

from harness.storage.models import ApiToken

PREFIX = "oh_"
MAX_PER_USER = 20  # live tokens; an account page is no key store


class TokenError(Exception):
    """Why a token was refused, in words (the API answers it as a 401)."""


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create(user, name: str) -> tuple[ApiToken, str]:
    """A new token for ``user``: the row and the token itself (never stored, show it once)."""
    if ApiToken.objects.filter(user=user, revoked__isnull=True).count() >= MAX_PER_USER:
        raise TokenError(f"you have {MAX_PER_USER} live tokens; revoke one first")
    token = PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(user=user, name=name.strip()[:100] or "token",
                                  digest=digest(token), prefix=token[:10])
    return row, token


def revoke(user, token_id: int) -> bool:
    """Revoke one of ``user``'s tokens; False when it is not theirs or already revoked."""
    return bool(ApiToken.objects.filter(pk=token_id, user=user, revoked__isnull=True)
                .update(revoked=timezone.now()))


def user_for(header: str | None):
    """The active user whose live token the ``Authorization`` header carries; raises
    :class:`TokenError` saying what is wrong."""
    if not header:
        raise TokenError("no API token: send 'Authorization: Bearer <token>' (make a token "
                         "on your account page)")
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise TokenError("the Authorization header must read 'Bearer <token>'")
    if not token.startswith(PREFIX) or not token.isascii() or len(token) > 100:
        raise TokenError("that is not an API token of this server (tokens start with "
                         f"{PREFIX!r})")
    row = (ApiToken.objects.select_related("user")
           .filter(Q(digest=digest(token)), revoked__isnull=True).first())
    if row is None or not row.user.is_active:
        raise TokenError("unknown or revoked API token")
    ApiToken.objects.filter(pk=row.pk).update(last_used=timezone.now())
    return row.user
