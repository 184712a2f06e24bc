"""Settings from environment variables, with safe local defaults.

Default storage is an embedded SQLite file in the user's data directory;
``DATABASE_URL=postgres://user:pass@host:port/name`` selects Postgres.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """Where the embedded database lives: $HARNESS_HOME, else $XDG_DATA_HOME/objective-harness."""
    home = os.environ.get("HARNESS_HOME")
    if home:
        return Path(home)
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "objective-harness"


def database_from_url(url: str | None) -> dict:
    """Django DATABASES entry from a URL (postgres:// or sqlite:///path); None means embedded."""
    if not url:
        path = data_dir() / "harness.sqlite3"
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


DEBUG = os.environ.get("HARNESS_DEBUG", "") == "1"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "local-development-only-not-secret")
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "webapp",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]
ROOT_URLCONF = "webapp.urls"
DATABASES = {"default": database_from_url(os.environ.get("DATABASE_URL"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": []},
}]
