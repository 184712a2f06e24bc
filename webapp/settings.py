"""The web app's and the workers' settings, from environment variables, with safe local
defaults. The results database is the storage app's (harness/storage/settings.py): an
embedded SQLite file in the user's data directory unless
``DATABASE_URL=postgres://user:pass@host:port/name`` selects Postgres.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.storage.home import data_dir

# The results database and the cells' lifecycle limits: the storage app's own settings.
from harness.storage.settings import (  # noqa: F401
    DATABASES,
    DEFAULT_AUTO_FIELD,
    HARNESS_HEARTBEAT_TIMEOUT,
    HARNESS_MAX_ATTEMPTS,
    TIME_ZONE,
    USE_TZ,
)
from webapp import logs
from webapp.secret_key import secret_key

BASE_DIR = Path(__file__).resolve().parent.parent


DEBUG = os.environ.get("HARNESS_DEBUG", "") == "1"
# DJANGO_SECRET_KEY, else one generated once into the data directory (webapp/secret_key.py)
SECRET_KEY = secret_key(DEBUG)
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1")
                 .split(",") if h.strip()]

# Behind a proxy that terminates TLS (HARNESS_HTTPS=1): trust its X-Forwarded-Proto, send
# plain HTTP to HTTPS, cookies over HTTPS only, and HSTS (a year, subdomains, preload
# list: HARNESS_HSTS_SECONDS, HARNESS_HSTS_SUBDOMAINS=0, HARNESS_HSTS_PRELOAD=0 to
# narrow it). Forms posted from https://<each allowed host> pass the CSRF origin check,
# or from CSRF_TRUSTED_ORIGINS (comma-separated) when set. `manage.py check --deploy` is
# then clean (tests/web/test_deploy_settings.py).
HTTPS = os.environ.get("HARNESS_HTTPS", "") == "1"
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("HARNESS_HSTS_SECONDS") or 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = os.environ.get("HARNESS_HSTS_SUBDOMAINS", "1") == "1"
    SECURE_HSTS_PRELOAD = os.environ.get("HARNESS_HSTS_PRELOAD", "1") == "1"
    CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get(
        "CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()] or [
        f"https://{h.lstrip('.')}" for h in ALLOWED_HOSTS if h != "*"]

INSTALLED_APPS = [
    "django.contrib.admin",  # /admin/ for staff (webapp/admin.py)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "harness.storage",
    "webapp",
]
MIDDLEWARE = [
    "webapp.middleware.RequestIdMiddleware",  # first: every later log line carries it
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "webapp.middleware.RequestTooLargeMiddleware",  # before the CSRF check reads the body
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
# Every log line to stderr with its request (or worker) context; HARNESS_LOG_FORMAT=json
# gives one JSON object per line (webapp/logs.py).
LOGGING = logs.config(os.environ.get("HARNESS_LOG_FORMAT", "text"),
                      os.environ.get("HARNESS_LOG_LEVEL", "INFO"))
ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
        "webapp.context.board",
    ]},
}]

STATIC_URL = "/static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", str(data_dir() / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise expects it to exist
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "webapp.staticfinders.PlotlyFinder",  # plotly.min.js from the installed plotly package
]
# Served from the app in development and tests too: no CDN, no network for pages.
WHITENOISE_USE_FINDERS = True
# A deployment (the Docker image sets HARNESS_STATIC_MANIFEST=1 for collectstatic and at
# run time): content-hashed names and gzip copies, which whitenoise serves compressed and
# cached for a year (plotly.min.js is 4.8 MB, 1.4 MB gzipped). Without it (development,
# tests) the files are served as found, under their own names.
if os.environ.get("HARNESS_STATIC_MANIFEST") == "1":
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# Submission limits (issue: limits and safety).
MAX_OBJECTIVE_BYTES = int(os.environ.get("HARNESS_MAX_OBJECTIVE_BYTES", 64 * 1024))
# harness submit: an upload's JSON body (code, claimed metrics and curves) at most this
# big; the share of its seeds per variant the server re-runs (at least one per variant).
MAX_UPLOAD_BYTES = int(os.environ.get("HARNESS_MAX_UPLOAD_BYTES", 2 * 1024 * 1024))
HARNESS_VERIFY_FRACTION = float(os.environ.get("HARNESS_VERIFY_FRACTION") or 0.2)
MAX_QUEUED_CELLS_PER_USER = int(os.environ.get("HARNESS_MAX_QUEUED_CELLS", 200))
# Submissions per user that may run the held-out variants in any 24 hours (webapp/quota.py);
# past it a submission runs the public variants only.
HARNESS_HELDOUT_RUNS_PER_DAY = int(os.environ.get("HARNESS_HELDOUT_RUNS_PER_DAY") or 5)
# Bodies up to this are parsed, so a paste over MAX_OBJECTIVE_BYTES gets the form's own
# message with its size; over it webapp.middleware answers before the CSRF check reads it.
DATA_UPLOAD_MAX_MEMORY_SIZE = 8 * 1024 * 1024
# Django's own checks on sign-up: not like the username, 8 characters or more, not a
# common password, not all digits.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
FILE_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"

# Who runs submitted cells (webapp/execution/executors.py): "thread" (an in-process background
# worker), "inline" (synchronously, for tests), "none" (left queued), or
# "module:function" taking the submission (the Celery executor).
HARNESS_EXECUTOR = os.environ.get("HARNESS_EXECUTOR", "thread")
# Train submissions for this many epochs instead of the suite's protocol (smoke runs and
# tests; stored under suite version V+eN, apart from real results). Unset: the protocol.
HARNESS_RUN_EPOCHS = int(os.environ.get("HARNESS_RUN_EPOCHS") or 0) or None

# --- Celery workers (tasks/celery.py reads the CELERY_* names; see tasks/__init__.py) ----
# The broker: HARNESS_BROKER_URL (production: redis://host:6379/0); unset, an embedded
# broker with no server (kombu's filesystem transport in the data directory), so that
# `python manage.py serve --with-worker` runs the web app and a worker on a laptop.
HARNESS_BROKER_URL = os.environ.get("HARNESS_BROKER_URL", "")
BROKER_DIR = data_dir() / "broker"
CELERY_BROKER_URL = HARNESS_BROKER_URL or "filesystem://"
# Seconds an unacknowledged Redis message stays invisible before Redis hands it out again
# (a worker killed mid-cell). Unset: computed from the suites' longest time limit.
HARNESS_VISIBILITY_TIMEOUT = float(os.environ.get("HARNESS_VISIBILITY_TIMEOUT") or 0) or None
# A running cell's heartbeat is written every HEARTBEAT_INTERVAL seconds; one older than
# HEARTBEAT_TIMEOUT means its worker is gone, and the reaper queues the cell again (at
# most MAX_ATTEMPTS starts per cell, then it fails with reason "infrastructure"); those
# two are the storage app's (harness/storage/settings.py).
HARNESS_HEARTBEAT_INTERVAL = float(os.environ.get("HARNESS_HEARTBEAT_INTERVAL") or 10)
# The reaper runs in every worker this often (0: never; `manage.py reap` runs it once), and
# sends again the cells queued longer than REQUEUE_AFTER seconds while their queue is empty
# (a broker that lost its messages).
HARNESS_REAP_INTERVAL = float(os.environ.get("HARNESS_REAP_INTERVAL") or 30)
HARNESS_REQUEUE_AFTER = float(os.environ.get("HARNESS_REQUEUE_AFTER") or 300)

# After cells land, the writer renders again the suite's (and the home page's) most recently
# built page bodies, this many of each (webapp/rendered.py); 0 leaves them to their readers.
HARNESS_REFRESH_PAGES = int(os.environ.get("HARNESS_REFRESH_PAGES") or 4)
