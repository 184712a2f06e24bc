"""Held-out variants: drawn from a secret only the server holds.

A suite may declare variants (``Suite.held_out``) that copy a public variant's protocol but
draw part of it (a split, a noise draw, a corruption order, an entity sample) from
``$HARNESS_HELDOUT_SECRET``. Their parameters appear in no public configuration and their
cells in no API answer; every ranked submission runs them, and the leaderboard shows how
an objective does on them beside its public twin, so tuning to the public draws shows as
a gap. Without the secret (a user's machine), they cannot run: :class:`Unavailable` says
why. The secret never reaches a sandboxed child: its environment is scrubbed
(``harness.sandbox.launch.environment``), and only what the draws produced is handed over.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os

SECRET_ENV = "HARNESS_HELDOUT_SECRET"
MIN_SECRET_CHARS = 16


class Unavailable(RuntimeError):
    """A held-out variant was asked for where the secret is not set."""


def available() -> bool:
    return bool(os.environ.get(SECRET_ENV))


def _secret() -> bytes:
    secret = os.environ.get(SECRET_ENV, "")
    if not secret:
        raise Unavailable(f"held-out variants draw from the server's secret "
                          f"(${SECRET_ENV}), which is not set here: they run only on the "
                          f"server, for every ranked submission")
    if len(secret) < MIN_SECRET_CHARS:
        raise Unavailable(f"${SECRET_ENV} must be at least {MIN_SECRET_CHARS} characters "
                          f"(it is the only thing between a submitter and the held-out draws)")
    return secret.encode()


def draw(suite: str, variant: str, purpose: str) -> int:
    """A 63-bit integer for ``purpose`` of a held-out variant: HMAC-SHA256 of the secret, so
    knowing draws (or the public variants') tells nothing about another or the secret."""
    message = json.dumps([suite, variant, purpose]).encode()
    digest = hmac.new(_secret(), message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def fingerprint() -> str:
    """Names the secret in a held-out cell's variant hash (a one-way hash): results drawn
    under a rotated secret are never mixed with the current draws."""
    return hmac.new(_secret(), b"fingerprint", hashlib.sha256).hexdigest()[:16]
