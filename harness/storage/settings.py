"""The storage app's settings, and the client's whole Django configuration.

The CLI and the Python API use this module (a plain install: no web server, no broker);
the web app and the workers import the storage part of it into theirs
(webapp/settings.py). The database is an embedded SQLite file in the user's data
directory (:mod:`harness.storage.home`) unless ``DATABASE_URL`` names another
(``postgres://user:pass@host:port/name`` or ``sqlite:///path``).
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

from harness.storage.home import data_dir


def database_from_url(url: str | None) -> dict:
    """Django DATABASES entry from a URL (postgres:// or sqlite:///path); None means embedded."""
    if not url:
        from harness.contract import draws

        # results drawn under a key (harness run --draws-key) in a database of their own:
        # never mixed with, nor replacing, the public ones
        folder = data_dir() if not draws.keyed() else data_dir() / f"draws-{draws.fingerprint()}"
        path = folder / "harness.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path),
                "OPTIONS": {"timeout": 30}}
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": unquote(parsed.path) or ":memory:",
                "OPTIONS": {"timeout": 30}}
    if parsed.scheme in ("postgres", "postgresql"):
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")),
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "CONN_MAX_AGE": 60,
        }
    raise ValueError(f"DATABASE_URL scheme {parsed.scheme!r} is not supported (postgres, sqlite)")


DATABASES = {"default": database_from_url(os.environ.get("DATABASE_URL"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
# A running cell's heartbeat older than this means its worker is gone (the reaper queues
# it again); a cell is started at most MAX_ATTEMPTS times, then fails ("infrastructure").
HARNESS_HEARTBEAT_TIMEOUT = float(os.environ.get("HARNESS_HEARTBEAT_TIMEOUT") or 120)
HARNESS_MAX_ATTEMPTS = int(os.environ.get("HARNESS_MAX_ATTEMPTS") or 3)

# The client alone: the stored models (an API token belongs to a user, hence auth) and the
# sessions table, so that the web app can open a database the CLI created and migrated.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "local-client-only-not-secret")
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes",
                  "django.contrib.sessions", "harness.storage"]
